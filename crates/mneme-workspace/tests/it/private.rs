//! Private-tag stripping on nested structured content.

use mneme_workspace::private::{strip, strip_value, stripped_value};
use serde_json::json;

#[test]
fn private_blocks_are_stripped_from_nested_content_blocks() {
    let mut content = json!([
        {"type": "text", "text": "hello <private>password=hunter2</private>world"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_01",
            "content": [
                {"type": "text", "text": "<PRIVATE>\napi_key=sk-123\n</PRIVATE>\nvisible result"},
                {"type": "text", "text": "untouched  "}
            ]
        },
        {
            "type": "tool_use",
            "name": "Bash",
            "input": {
                "command": "curl -H 'auth: <private>token-abc</private>' x",
                "deep": [[{"note": "<private>unclosed secret"}]],
                "<private>key-secret</private>label": 7
            }
        }
    ]);

    assert!(strip_value(&mut content), "something was stripped");

    assert_eq!(
        content,
        json!([
            {"type": "text", "text": "hello world"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": [
                    {"type": "text", "text": "visible result"},
                    {"type": "text", "text": "untouched  "}
                ]
            },
            {
                "type": "tool_use",
                "name": "Bash",
                "input": {
                    "command": "curl -H 'auth: ' x",
                    "deep": [[{"note": ""}]],
                    "label": 7
                }
            }
        ])
    );
    let text = content.to_string();
    for secret in ["hunter2", "sk-123", "token-abc", "unclosed secret", "key-secret"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}

#[test]
fn values_without_private_blocks_are_left_alone() {
    let original = json!({"a": ["  spaced  ", 1, null, true, {"b": "<b>bold</b>"}]});
    let mut copy = original.clone();
    assert!(!strip_value(&mut copy));
    assert_eq!(copy, original);
    assert_eq!(stripped_value(&original), original);
}

#[test]
fn a_plain_string_body_is_stripped_like_content_blocks() {
    assert_eq!(strip("result: <private>a</private> ok <private>b</private>"), "result:  ok");
}
