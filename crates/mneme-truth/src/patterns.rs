//! Regex subject-predicate-object extraction, English and German (the seed's patterns,
//! with the predicate captured instead of recovered by string search).
//!
//! Deliberately conservative: capitalised subjects, a small set of verbs, objects of 3–60
//! characters up to the end of the clause. Pronoun and article subjects ("It", "This",
//! "Das") and stop-word objects are dropped as noise; triples are de-duplicated
//! case-insensitively. The LLM consolidator handles everything subtler.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triple {
    pub subject: String,
    pub predicate: String,
    pub object: String,
}

const SUBJ_EN: &str = r"([A-Z][a-zA-Z \t]{1,40}?)";
const SUBJ_DE: &str = r"([A-ZÄÖÜ][a-zA-ZäöüÄÖÜß \t]{1,40}?)";
/// The object runs to the end of the clause: punctuation followed by a space or the end
/// (so "TLS 1.3" and "example.com" stay whole).
const OBJ: &str = r"(.{3,60}?)(?:[.,;!?](?:\s|$)|$)";

/// The verbs, English then German, each with its one capture group (the predicate) and
/// what may follow it before the object; the order is the order triples come out in.
const VERBS_EN: [&str; 9] = [
    r"(is)[ \t]+(?:a[ \t]+|an[ \t]+|the[ \t]+)?",
    r"(has)[ \t]+",
    r"(uses?)[ \t]+",
    r"(requires?)[ \t]+",
    r"(supports?)[ \t]+",
    r"(runs?[ \t]+on)[ \t]+",
    r"(prefers?)[ \t]+",
    r"(lives[ \t]+in)[ \t]+",
    r"(works[ \t]+(?:at|for))[ \t]+",
];
const VERBS_DE: [&str; 6] = [
    r"(ist)[ \t]+(?:ein[ \t]+|eine[ \t]+|der[ \t]+|die[ \t]+|das[ \t]+)?",
    r"(hat)[ \t]+",
    r"(verwendet|benutzt|nutzt)[ \t]+",
    r"(braucht|benötigt)[ \t]+",
    r"(läuft[ \t]+auf)[ \t]+",
    r"(wohnt[ \t]+in)[ \t]+",
];

/// One pattern per language, its verbs as alternatives (group 1 the subject, then one
/// group per verb, then the object), with the number of the language's first verb in the
/// triples' order. One automaton each, not one per verb: compiling fifteen, each with its
/// own bounded repetitions, cost a process that reads a message about 5 ms.
static PATTERNS: LazyLock<[(Regex, usize, usize); 2]> = LazyLock::new(|| {
    let compile = |subject: &str, verbs: &[&str]| {
        Regex::new(&format!(r"(?m)\b{subject}[ \t]+(?:{}){OBJ}", verbs.join("|"))).expect("extraction patterns are valid")
    };
    [(compile(SUBJ_EN, &VERBS_EN), 0, VERBS_EN.len()), (compile(SUBJ_DE, &VERBS_DE), VERBS_EN.len(), VERBS_DE.len())]
});

const NOISE_SUBJECTS: &[&str] = &[
    "it",
    "this",
    "that",
    "there",
    "here",
    "he",
    "she",
    "i",
    "we",
    "you",
    "they",
    "what",
    "which",
    "who",
    "everything",
    "nothing",
    "something",
    "es",
    "das",
    "dies",
    "er",
    "sie",
    "wir",
    "ich",
    "du",
    "ihr",
    "man",
    "was",
    "wer",
    "hier",
    "da",
    "the",
    "a",
    "an",
    "der",
    "die",
];
const NOISE_OBJECTS: &[&str] = &["it", "this", "that", "good", "fine", "ok", "okay", "great", "done", "es", "das", "gut", "so"];

/// The triples in `text`, de-duplicated, in pattern order.
pub fn extract(text: &str) -> Vec<Triple> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    // Each match with its verb's place in the order, sorted by it (stable: text order within).
    let mut found: Vec<(usize, regex::Captures<'_>)> = Vec::new();
    for (re, first, verbs) in PATTERNS.iter() {
        for caps in re.captures_iter(text) {
            if let Some(k) = (0..*verbs).find(|k| caps.get(2 + k).is_some()) {
                found.push((first + k, caps));
            }
        }
    }
    found.sort_by_key(|(verb, _)| *verb);
    for (_, caps) in found {
        let (Some(subject), Some(verb), Some(object)) = (caps.get(1), caps.iter().skip(2).flatten().next(), caps.iter().last().flatten())
        else {
            continue;
        };
        // A subject that begins inside a longer noun phrase ("The commute to the
        // Greyhaven office is killing me": the pattern's subject runs 40 characters at
        // most) is the tail of something else.
        if inside_a_phrase(&text[..subject.start()]) {
            continue;
        }
        let Some(subject) = clean_subject(subject.as_str()) else { continue };
        let predicate = verb.as_str().split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        // A short object can swallow the clause's final punctuation ("use it." at the end
        // of the text: the object needs 3 characters); it is not part of the object.
        let object = object
            .as_str()
            .trim()
            .trim_end_matches(['.', ',', ';', '!', '?'])
            .trim_matches(|c: char| c == '"' || c == '\'' || c == '`')
            .trim()
            .to_string();
        if subject.chars().count() < 2 || object.chars().count() < 2 || predicate.len() < 2 {
            continue;
        }
        if NOISE_SUBJECTS.contains(&subject.to_lowercase().as_str()) || NOISE_OBJECTS.contains(&object.to_lowercase().as_str()) {
            continue;
        }
        // An object the speaker is acted on in ("… is killing me") tells of them (in
        // lower case: "US East" is a place).
        if object.split(|c: char| !c.is_alphanumeric()).any(|w| PERSONAL.contains(&w)) {
            continue;
        }
        // A degree word before the object ("The neighbourhood is so noisy at night",
        // "The build is way too slow") grades how the speaker finds it: a mood, not a
        // property of the thing.
        let graded = object.split_whitespace().next().is_some_and(|w| DEGREE.contains(&w.to_lowercase().as_str()));
        if graded && ["is", "ist"].contains(&predicate.as_str()) {
            continue;
        }
        let key = format!("{}|{}|{}", subject.to_lowercase(), predicate, object.to_lowercase());
        if seen.insert(key) {
            out.push(Triple { subject, predicate, object });
        }
    }
    out
}

/// The speaker as the one a thing acts on ("… is killing me", "… drives us mad"): an
/// object holding one of these tells what the speaker lives through, an episode, not a
/// property of the thing. (Possessives and relative clauses stay: "Raw food is the eating
/// plan I follow", "JupyterLab is open on my second monitor".)
const PERSONAL: &[&str] = &["me", "us", "mich", "mir", "uns"];

/// Degree words that open a graded adjective ("so noisy", "way too slow", "echt teuer").
const DEGREE: &[&str] = &[
    "so",
    "too",
    "very",
    "really",
    "pretty",
    "quite",
    "super",
    "kinda",
    "extremely",
    "way",
    "insanely",
    "incredibly",
    "totally",
    "soo",
    "sooo",
    "ziemlich",
    "sehr",
    "echt",
    "total",
    "zu",
    "voll",
];

/// Whether the words before a subject make it the tail of a longer phrase: the last of
/// them is an article, a preposition or a possessive ("the commute to the | Greyhaven
/// office"), not the end of a clause.
fn inside_a_phrase(before: &str) -> bool {
    let Some(last) = before.split_whitespace().next_back() else { return false };
    if last.ends_with(|c: char| !c.is_alphanumeric()) {
        return false;
    }
    const JOINING: &[&str] = &[
        "the", "a", "an", "to", "of", "at", "in", "on", "for", "from", "with", "by", "my", "our", "your", "his", "her", "their", "its",
        "der", "die", "das", "den", "dem", "des", "ein", "eine", "zum", "zur", "im", "am", "vom", "beim", "mit", "von", "bei",
    ];
    JOINING.contains(&last.to_lowercase().as_str())
}

/// Words that end a clause inside what the subject pattern matched: a conjunction, a
/// verb or a discourse word ("Games was scary but Halcyon Bank", "Ok so Mossgrove
/// Games"). The subject is what follows the last of them.
const CLAUSE_BREAKS: &[&str] = &[
    "and", "but", "or", "so", "because", "when", "if", "then", "while", "although", "though", "since", "that", "which", "who", "was",
    "were", "is", "are", "has", "have", "had", "been", "will", "would", "ok", "okay", "und", "aber", "oder", "weil", "wenn", "dass", "war",
    "ist", "sind", "hat",
];

/// Subjects that name no one and nothing ("Someone on my team is principal engineer at
/// some bank").
const INDEFINITE: &[&str] = &["someone", "somebody", "anyone", "anybody", "everyone", "everybody", "nobody", "people", "jemand", "niemand"];

/// Trims, collapses inner whitespace, keeps what follows a clause break and drops a
/// leading article ("The server" → "server"). `None` when what is left is no subject of a
/// statement about a thing: it starts in lower case after a break (other than with an
/// article: "Remember that the deploy is on Friday"), names no one, or is
/// one of the speaker's people ("My flatmate has gone full paleo": the conversational
/// extractor reads people's facts, with their slots).
fn clean_subject(raw: &str) -> Option<String> {
    let words: Vec<&str> = raw.split_whitespace().collect();
    let start = words.iter().rposition(|w| CLAUSE_BREAKS.contains(&w.to_lowercase().as_str())).map_or(0, |i| i + 1);
    let words = &words[start..];
    let first = words.first()?;
    let article = ["the", "der", "die", "das"].contains(&first.to_lowercase().as_str());
    if start > 0 && !article && !first.chars().next().is_some_and(char::is_uppercase) {
        return None;
    }
    let lower = first.to_lowercase();
    if INDEFINITE.contains(&lower.as_str()) {
        return None;
    }
    let people = ["my", "our", "mein", "meine", "unser", "unsere"].contains(&lower.as_str())
        && words.iter().skip(1).any(|w| crate::lexicon::RELATIONS.contains(&w.to_lowercase().as_str()));
    if people {
        return None;
    }
    let words = if article && words.len() > 1 { &words[1..] } else { words };
    Some(words.join(" "))
}
