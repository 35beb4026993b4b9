//! `<private>...</private>` stripping, applied to everything mneme persists (tool
//! results, transcripts, logs, summaries).
//!
//! Rules (the seed's, made fail-closed):
//! - Tags are matched case-insensitively; `<private attr="x">` and `</private >` count.
//! - Blocks may span lines; a string may hold several.
//! - Blocks nest: `<private>a<private>b</private>c</private>` removes all of `a`, `b`, `c`
//!   (a non-nesting regex would leak `c`).
//! - An unclosed `<private>` removes everything to the end of the string.
//! - A stray `</private>` outside any block is removed (the tag only).
//! - When something was removed the result is trimmed, as the seed does; a string without
//!   tags is returned unchanged (borrowed), whitespace included.
//!
//! `strip_value` applies this to every string inside a JSON value, object keys included,
//! so structured content (`[{"type":"text","text":...}, {"type":"tool_result","content":
//! [...]}]`) is covered at any depth.

use std::borrow::Cow;

use serde_json::Value;

const OPEN: &[u8] = b"<private";
const CLOSE: &[u8] = b"</private";

/// Removes private blocks from `text` (see the module doc).
pub fn strip(text: &str) -> Cow<'_, str> {
    match remove(text, false) {
        None => Cow::Borrowed(text),
        Some(output) => Cow::Owned(output.trim().to_owned()),
    }
}

/// Like [`strip`], but every removed line break is kept (and nothing is trimmed), so the
/// remaining text keeps its line numbers: for indexing whole files, where line ranges
/// must point at the file as it is.
pub fn strip_keeping_lines(text: &str) -> Cow<'_, str> {
    match remove(text, true) {
        None => Cow::Borrowed(text),
        Some(output) => Cow::Owned(output),
    }
}

/// The text without its private blocks; `None` when it has no tag. With `keep_lines`,
/// the line breaks of removed parts stay.
fn remove(text: &str, keep_lines: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut output = String::new();
    let mut depth = 0usize;
    let mut kept_from = 0usize;
    let mut changed = false;
    let mut index = 0usize;
    let dropped = |output: &mut String, part: &str| {
        if keep_lines {
            output.extend(std::iter::repeat_n('\n', part.matches('\n').count()));
        }
    };
    while let Some(offset) = bytes[index..].iter().position(|&b| b == b'<') {
        let at = index + offset;
        let tag = tag_end(bytes, at, OPEN).map(|end| (end, true)).or_else(|| tag_end(bytes, at, CLOSE).map(|end| (end, false)));
        let Some((end, opens)) = tag else {
            index = at + 1;
            continue;
        };
        if depth == 0 {
            output.push_str(&text[kept_from..at]);
        } else {
            dropped(&mut output, &text[kept_from..at]);
        }
        dropped(&mut output, &text[at..end]);
        if opens {
            depth += 1;
        } else {
            depth = depth.saturating_sub(1);
        }
        changed = true;
        index = end;
        kept_from = end;
    }
    if !changed {
        return None;
    }
    if depth == 0 {
        output.push_str(&text[kept_from..]);
    } else {
        dropped(&mut output, &text[kept_from..]);
    }
    Some(output)
}

/// Removes private blocks from every string in `value`, recursively, keys included.
/// Returns whether anything changed. If stripping makes two keys of one object equal, the
/// later one wins.
pub fn strip_value(value: &mut Value) -> bool {
    match value {
        Value::String(text) => match strip(text) {
            Cow::Borrowed(_) => false,
            Cow::Owned(stripped) => {
                *text = stripped;
                true
            }
        },
        Value::Array(items) => items.iter_mut().fold(false, |changed, item| strip_value(item) | changed),
        Value::Object(map) => {
            let mut changed = false;
            if map.keys().any(|key| matches!(strip(key), Cow::Owned(_))) {
                let entries = std::mem::take(map);
                for (key, item) in entries {
                    map.insert(strip(&key).into_owned(), item);
                }
                changed = true;
            }
            map.values_mut().fold(changed, |changed, item| strip_value(item) | changed)
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Returns a copy of `value` with private blocks removed.
pub fn stripped_value(value: &Value) -> Value {
    let mut copy = value.clone();
    strip_value(&mut copy);
    copy
}

/// If a tag named by `prefix` (`<private` or `</private`, case-insensitive) starts at
/// `at`, returns the index just past its closing `>`. The name must be followed by `>` or
/// by whitespace and then, before any `<`, a `>`. A tag without `>` runs to the end of the
/// text (fail closed: `<private` with no `>` still opens a block).
fn tag_end(bytes: &[u8], at: usize, prefix: &[u8]) -> Option<usize> {
    let after = at + prefix.len();
    let name = bytes.get(at..after)?;
    if !name.eq_ignore_ascii_case(prefix) {
        return None;
    }
    match bytes.get(after) {
        None => Some(after),
        Some(b'>') => Some(after + 1),
        Some(next) if next.is_ascii_whitespace() => match bytes[after..].iter().position(|&b| b == b'>' || b == b'<') {
            Some(offset) if bytes[after + offset] == b'>' => Some(after + offset + 1),
            Some(_) => None,
            None => Some(bytes.len()),
        },
        Some(_) => None,
    }
}

/// Whether `text` may contain a private tag (a cheap pre-check before parsing).
pub fn mentions_private(text: &str) -> bool {
    let bytes = text.as_bytes();
    (0..bytes.len()).any(|at| tag_end(bytes, at, OPEN).is_some() || tag_end(bytes, at, CLOSE).is_some())
}

/// A payload with private blocks removed from every string it holds (via its JSON form,
/// so every field of every payload kind is covered). Unchanged when it holds no tag.
/// Fails closed: if the stripped form no longer reads as a payload, the payload is refused
/// rather than kept with its private parts.
pub fn strip_payload(payload: crate::Payload) -> crate::CoreResult<crate::Payload> {
    let refuse = |e: serde_json::Error| crate::CoreError::invalid("payload", format!("cannot remove its <private> blocks: {e}"));
    let mut value = serde_json::to_value(&payload).map_err(refuse)?;
    if !mentions_private(&value.to_string()) {
        return Ok(payload);
    }
    strip_value(&mut value);
    serde_json::from_value(value).map_err(refuse)
}

/// `strip` for an owned optional string.
pub fn strip_opt(text: Option<String>) -> Option<String> {
    text.map(|t| if mentions_private(&t) { strip(&t).into_owned() } else { t })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(strip(input), expected, "input: {input:?}");
    }

    #[test]
    fn text_without_tags_is_borrowed_unchanged() {
        let text = "  plain text, <b>html</b> and a < sign  ";
        assert!(matches!(strip(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn blocks_are_removed() {
        check("a <private>secret</private> b", "a  b");
        check("<PRIVATE>x</Private>keep", "keep");
        check("one\n<private>\nline1\nline2\n</private>\ntwo", "one\n\ntwo");
        check("a<private>1</private>b<private>2</private>c", "abc");
        check("a <private note=\"x\">s</private > b", "a  b");
    }

    #[test]
    fn unclosed_blocks_run_to_the_end() {
        check("keep <private>secret to the end", "keep");
        check("keep <private", "keep");
        check("keep <private data", "keep");
    }

    #[test]
    fn nested_blocks_do_not_leak_the_outer_tail() {
        check("a<private>x<private>y</private>leak?</private>b", "ab");
    }

    #[test]
    fn stray_closing_tags_and_lookalikes() {
        check("a</private>b", "ab");
        check("<privateer>ship</privateer>", "<privateer>ship</privateer>");
        check("<priv>x</priv>", "<priv>x</priv>");
    }

    #[test]
    fn multibyte_text_around_tags_survives() {
        check("日本<private>秘密</private>語", "日本語");
    }

    #[test]
    fn payloads_lose_private_blocks_in_every_field() {
        let payload = crate::Payload::Event(crate::EventPayload {
            event_kind: "message".into(),
            reference: None,
            sender: Some("ann <PRIVATE>ann@example.com</private>".into()),
            text: "deploy at 5 <private>password hunter2</private>".into(),
            event_time: None,
        });
        let stripped = strip_payload(payload).expect("strippable");
        let text = serde_json::to_string(&stripped).expect("serialisable");
        assert!(!text.contains("hunter2") && !text.contains("example.com"), "{text}");
        assert!(text.contains("deploy at 5"), "{text}");
        assert!(mentions_private("a </Private> b") && !mentions_private("privately"));
        assert_eq!(strip_opt(Some("x <private>y</private>".into())).as_deref(), Some("x"));
    }

    #[test]
    fn stripping_a_file_keeps_its_line_numbers() {
        let text = "a\n<private>x\ny\n</private>b\nc <private>z\n";
        let kept = strip_keeping_lines(text);
        assert_eq!(kept, "a\n\n\nb\nc \n");
        assert_eq!(kept.lines().count(), text.lines().count());
        assert_eq!(strip(text), "a\nb\nc");
    }
}
