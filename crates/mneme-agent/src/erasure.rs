//! A user's request, in conversation, that the agent forget something about them:
//! "please forget my SSN", "can you delete my phone number from your memory?", "forget
//! everything about my ex". The hooks erase the matching records of that user at once
//! (`HookEngine::message`).
//!
//! Erasing is not undone, so the request must be unmistakable: a sentence that *is* the
//! request, addressed to the agent (the verb first, after at most a greeting and a
//! politeness formula), whose object is the speaker's own ("my …", "what I said about …",
//! "everything about …"). Sentences that only mention forgetting ("I always forget my
//! keys", "don't forget my birthday", "I forgot my password") are not requests, and
//! neither is "forget it" or "forget the meeting" (no object of the user's to erase).
//! When in doubt nothing is erased: the user can say it plainly, and the owner can run
//! `mneme forget`.

use std::sync::LazyLock;

use regex::Regex;

static REQUEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)^(?:(?:hey|hi|ok|okay|so|and|also|now)\b[,!]?\s+)?",
        r"(?:(?:please|pls|kindly)\b[,]?\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?|i\s+(?:want|need|would like)\s+you\s+to\s+|i'd\s+like\s+you\s+to\s+)?",
        r"(?:forget|erase|delete|remove|wipe|purge)\s+",
        r"(?:(?:all\s+)?(?:about\s+|everything\s+(?:you\s+know\s+)?about\s+|what\s+i\s+(?:said|told\s+you)\s+about\s+))?",
        r"(?P<object>my\s+[^.!?;]{1,80}?|(?:what\s+i\s+(?:said|told\s+you)|everything(?:\s+you\s+know)?)\s+about\s+[^.!?;]{1,80}?)",
        r"(?:\s+(?:from|in)\s+(?:your|the)\s+(?:memory|memories|records|notes|files))?",
        r"(?:\s*,?\s*(?:please|thanks|thank\s+you))?\s*[.!?]*\s*$",
    ))
    .expect("the request pattern is valid")
});

/// What the user asks to be forgotten, as the words a record must hold ("SSN", "phone
/// number"), or `None` when `text` is not such a request. Each sentence is tried.
pub fn forget_request(text: &str) -> Option<String> {
    // Nearly no message asks to forget: without one of the request's verbs the pattern cannot
    // match, so it is not even compiled (a hook process would spend ~0.5 ms building it).
    let lower = text.to_lowercase();
    if !["forget", "erase", "delete", "remove", "wipe", "purge"].iter().any(|verb| lower.contains(verb)) {
        return None;
    }
    text.split_inclusive(['.', '!', '?', '\n']).map(str::trim).find_map(|sentence| {
        let object = REQUEST.captures(sentence)?.name("object")?.as_str();
        let words: Vec<&str> = object
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|w| !w.is_empty())
            .skip_while(|w| {
                matches!(w.to_lowercase().as_str(), "my" | "what" | "i" | "said" | "told" | "you" | "everything" | "know" | "about")
            })
            .collect();
        let words: Vec<&str> = words.into_iter().filter(|w| !matches!(w.to_lowercase().as_str(), "my" | "the" | "a" | "an")).collect();
        (!words.is_empty()).then(|| words.join(" "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_request_names_what_to_forget() {
        for (text, about) in [
            ("Please forget my SSN", "SSN"),
            ("please forget my SSN.", "SSN"),
            ("Can you delete my phone number from your memory?", "phone number"),
            ("forget everything about my ex", "ex"),
            ("Hey, could you please erase what I told you about Kreuzberg?", "Kreuzberg"),
            ("Thanks for the help. Now forget my home address, please!", "home address"),
            ("I'd like you to remove my card number", "card number"),
        ] {
            assert_eq!(forget_request(text).as_deref(), Some(about), "{text}");
        }
    }

    #[test]
    fn mentioning_forgetting_is_not_a_request() {
        for text in [
            "I always forget my keys",
            "I forgot my password again",
            "don't forget my birthday",
            "Do not forget my meds tomorrow",
            "forget it",
            "forget the meeting, it is cancelled",
            "why would you forget my name?",
            "my sister keeps forgetting my address",
            "can you remind me to delete the old branch",
            "delete the file and forget about it",
        ] {
            assert_eq!(forget_request(text), None, "{text}");
        }
    }
}
