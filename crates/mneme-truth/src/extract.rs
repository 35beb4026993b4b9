//! The extractor: utterance → sentences → clauses → stemmed tokens → claims.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};

use super::lexicon::{CHANGES, JOB_HEADS, NEGATIONS, RELATIONS, SLOTS, Shape, SlotDef, SlotKind};

/// What an utterance does to a slot's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// The value of a single-valued slot, replacing any other (`old` when named).
    Set,
    /// One more value of a multi-valued slot.
    Add,
    /// One value of a multi-valued slot is no longer true.
    Remove,
    /// The value of a single-valued slot is no longer true; no new value was given.
    Negate,
}

/// One fact an utterance states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// `None`: the speaker. `Some("my sister")`, `Some("Bruno")`: someone else.
    pub other: Option<String>,
    /// The slot; `None` for a bare correction ("actually it's X, not Y"), whose slot is
    /// the one that holds `old`.
    pub slot: Option<&'static str>,
    pub value: String,
    pub op: Op,
    /// The value this one replaces, when the utterance names it.
    pub old: Option<String>,
    /// The clause the claim came from.
    pub clause: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    En,
    De,
}

#[derive(Debug, Clone)]
struct Tok {
    text: String,
    lower: String,
    stem: String,
    /// Capitalisation assumed, not written (an all-lower-case message: "i live in tartu").
    lowered: bool,
    cap: bool,
}

/// A slot's cues, nouns and gazetteer, stemmed or split once per language.
struct Compiled {
    cues: Vec<Vec<String>>,
    /// Cues written `+word` count only beside one of the slot's nouns ("a cat called Miso").
    needs_noun: Vec<bool>,
    nouns: Vec<Vec<String>>,
    question: Vec<Vec<String>>,
}

/// One language's stemmed lexicon. Each is built on first use of its language, so a process
/// that reads only English never stems the German phrases (the lexicon's stemming was about
/// 3 % of a prompt hook's CPU).
struct Lexicon {
    slots: Vec<Compiled>,
    negations: Vec<Vec<String>>,
    changes: Vec<String>,
}

fn stemmer(lang: Lang) -> Stemmer {
    Stemmer::create(match lang {
        Lang::En => Algorithm::English,
        Lang::De => Algorithm::German,
    })
}

fn stem_phrase(s: &Stemmer, phrase: &str) -> Vec<String> {
    phrase.split_whitespace().map(|w| s.stem(&w.to_lowercase()).into_owned()).collect()
}

fn compile(lang: Lang) -> Lexicon {
    let s = stemmer(lang);
    Lexicon {
        slots: SLOTS
            .iter()
            .map(|d| Compiled {
                cues: d.cues.iter().map(|c| stem_phrase(&s, c.trim_start_matches('+'))).collect(),
                needs_noun: d.cues.iter().map(|c| c.starts_with('+')).collect(),
                nouns: d.nouns.iter().map(|c| stem_phrase(&s, c)).collect(),
                question: d.question.iter().map(|c| stem_phrase(&s, c)).collect(),
            })
            .collect(),
        negations: NEGATIONS.iter().map(|n| stem_phrase(&s, n)).collect(),
        changes: CHANGES.iter().map(|c| s.stem(c).into_owned()).collect(),
    }
}

fn lexicon(lang: Lang) -> &'static Lexicon {
    static EN: LazyLock<Lexicon> = LazyLock::new(|| compile(Lang::En));
    static DE: LazyLock<Lexicon> = LazyLock::new(|| compile(Lang::De));
    match lang {
        Lang::En => &EN,
        Lang::De => &DE,
    }
}

/// One slot's gazetteer entries: (lower-case words, canonical value or None).
type Gazetteer = Vec<(Vec<String>, Option<String>)>;

/// Gazetteer entries per slot.
static GAZETTEERS: LazyLock<Vec<Gazetteer>> = LazyLock::new(|| {
    SLOTS
        .iter()
        .map(|d| {
            d.gazetteer
                .iter()
                .map(|e| match e.split_once('=') {
                    Some((alias, canonical)) => (words(alias), Some(canonical.to_string())),
                    None => (words(e), None),
                })
                .collect()
        })
        .collect()
});

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

const GERMAN_MARKERS: &[&str] = &[
    "ich", "wir", "mein", "meine", "meinen", "unser", "unsere", "bin", "sind", "nicht", "mehr", "jetzt", "heißt", "und", "wohne",
    "arbeite", "habe", "seit", "auf", "nach", "bei", "ist", "von", "mich", "mir", "gegen", "als",
];

const FIRST_PERSON: &[&str] = &["i", "we", "me", "us", "ich", "wir", "mich", "mir", "uns"];
const POSSESSIVE: &[&str] = &["my", "our", "mein", "meine", "meinen", "meiner", "meinem", "unser", "unsere", "unseren", "unserem"];
/// Subjects that name no one: what they do is no one's fact.
const INDEFINITE: &[&str] = &["someone", "somebody", "anyone", "anybody", "jemand"];
const GENERIC_SUBJECTS: &[&str] = &["everyone", "everybody", "nobody", "people", "everything", "all", "it", "call", "please"];
const PROJECT_WORDS: &[&str] = &[
    "project",
    "app",
    "codebase",
    "backend",
    "service",
    "site",
    "product",
    "stack",
    "system",
    "api",
    "team",
    "projekt",
    "infra",
    "infrastructure",
    "servers",
    "server",
    "website",
    "apps",
    "backend",
    "frontend",
    "repo",
];
/// Clause-initial capitalised words that are not names.
const NOT_NAMES: &[&str] = &[
    "honestly",
    "besides",
    "nothing",
    "everything",
    "sadly",
    "actually",
    "turns",
    "big",
    "quick",
    "oh",
    "morning",
    "please",
    "call",
    "everyone",
    "nobody",
    "these",
    "our",
    "my",
    "the",
    "in",
    "if",
    "so",
    "well",
    "also",
    "finally",
    "anyway",
    "sorry",
    "just",
    "btw",
    "by",
    "since",
    "now",
    "today",
    "yesterday",
    "last",
    "this",
    "then",
    "and",
    "but",
    "it",
    "i",
    "we",
    "hey",
    "hi",
    "hello",
    "good",
    "great",
    "yes",
    "no",
    "ok",
    "okay",
    "update",
    "news",
    "fun",
    "fact",
    "guess",
    "what",
    "lately",
    "recently",
    "luckily",
    "unfortunately",
    "plus",
    "after",
    "before",
    "from",
    "at",
    "on",
    "for",
    "und",
    "aber",
    "seit",
    "jetzt",
    "mein",
    "meine",
    "unser",
    "unsere",
    "ich",
    "wir",
    "das",
    "die",
    "der",
    "übrigens",
    "kurzes",
    "kurz",
    "ach",
    "leider",
    "endlich",
    "also",
    "ja",
    "nein",
    "a",
    "an",
    "there",
    "here",
    "only",
    "mostly",
    "heute",
    "gestern",
    "inzwischen",
    "mittlerweile",
    "neuerdings",
    "seitdem",
    "new",
    "another",
    "some",
    "one",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "montag",
    "dienstag",
    "mittwoch",
    "donnerstag",
    "freitag",
    "samstag",
    "sonntag",
    "januar",
    "februar",
    "märz",
    "juni",
    "juli",
    "oktober",
    "dezember",
    "christmas",
    "easter",
    "weihnachten",
    "ostern",
];
const HYPOTHETICAL: &[&str] = &[
    "if",
    "would",
    "might",
    "maybe",
    "perhaps",
    "should",
    "could",
    "wish",
    "hope",
    "considering",
    "thinking",
    "plan",
    "planning",
    "want",
    "wanna",
    "wenn",
    "falls",
    "würde",
    "würden",
    "vielleicht",
    "überlege",
    "möchte",
    "sollte",
    "könnte",
    "will",
    "going",
    "tempted",
    "someday",
    "eventually",
    "dream",
    "wondering",
    "evaluating",
    "debating",
    "whether",
    "comparing",
    "pretend",
    "imagine",
    "parallel",
    "hypothetically",
];
const INTERROGATIVE: &[&str] = &[
    "should", "would", "could", "can", "do", "does", "did", "is", "are", "what", "how", "which", "who", "where", "why", "when", "whats",
    "hows", "wheres", "whos", "soll", "sollte", "kann", "ist", "was", "wie", "wo", "welche", "welcher", "warum", "wann",
];
/// Words skipped between a cue and its value.
const SKIP: &[&str] = &[
    "but",
    "and",
    "so",
    "aber",
    "und",
    "is",
    "am",
    "are",
    "was",
    "be",
    "been",
    "to",
    "at",
    "in",
    "on",
    "for",
    "by",
    "as",
    "called",
    "named",
    "heißt",
    "ist",
    "bei",
    "nach",
    "auf",
    "the",
    "a",
    "an",
    "now",
    "just",
    "really",
    "actually",
    "mostly",
    "currently",
    "new",
    "jetzt",
    "mainly",
    "mostly",
    "hauptsächlich",
    "all",
    "it",
    "its",
    "it's",
    "of",
    "with",
    "me",
    "my",
    "our",
    "i",
    "we",
    "that",
    "up",
    "into",
    "out",
    "called",
    "der",
    "die",
    "das",
    "ein",
    "eine",
    "einen",
    "zu",
    "zum",
    "zur",
    "gerade",
    "officially",
    "finally",
    "also",
    "too",
    "been",
    "got",
    "get",
    "pretty",
    "quite",
    "very",
    "so",
    "being",
    "an",
    "some",
    "doing",
    "gone",
    "went",
    "do",
    "does",
    "did",
    "have",
    "has",
    "had",
    "also",
    "now",
    "fully",
    "totally",
    "completely",
    "still",
];
/// Words that end a value.
const STOP: &[&str] = &[
    "with",
    "for",
    "at",
    "since",
    "because",
    "so",
    "but",
    "now",
    "recently",
    "again",
    "too",
    "as",
    "well",
    "already",
    "these",
    "this",
    "last",
    "next",
    "ago",
    "mostly",
    "almost",
    "exclusively",
    "honestly",
    "really",
    "the",
    "and",
    "or",
    "in",
    "on",
    "from",
    "to",
    "over",
    "after",
    "before",
    "when",
    "which",
    "who",
    "where",
    "by",
    "is",
    "was",
    "are",
    "were",
    "has",
    "have",
    "had",
    "will",
    "just",
    "though",
    "anyway",
    "anymore",
    "then",
    "there",
    "here",
    "not",
    "no",
    "of",
    "jetzt",
    "seit",
    "und",
    "aber",
    "mit",
    "für",
    "als",
    "nicht",
    "mehr",
    "schon",
    "wieder",
    "heute",
    "umgezogen",
    "umgestiegen",
    "gewechselt",
    "month",
    "week",
    "year",
    "today",
    "yesterday",
    "lately",
    "apparently",
    "i",
    "we",
    "my",
    "our",
    "that",
    "it",
    "never",
    "always",
    "me",
    "you",
    "they",
    "he",
    "she",
    "a",
    "an",
    "once",
    "every",
    "some",
    "all",
    "days",
    "weekends",
    "hooked",
    "nowadays",
    "currently",
    "full-time",
    "part-time",
    "instead",
    "except",
];
const LIST_JOINERS: &[&str] = &[",", "and", "&", "und", "plus", "or", "oder"];

fn is_word(t: &Tok, words: &[&str]) -> bool {
    words.contains(&t.lower.as_str())
}

/// The utterance's claims, in the order it states them. `speaker_is_user`: false for
/// the assistant's own turns, which state no facts about anyone.
pub fn extract(text: &str) -> Vec<Claim> {
    polarised(asserted_clauses(text, false))
}

/// What a message that asks states before it asks: the claims of the clauses that lead a
/// question ("Anniversary coming up with Maelys (my partner), any gift ideas?" states the
/// partner), and nothing from a sentence that only asks ("what editor does sam use?"), a
/// request or a sentence without a question mark.
pub fn extract_beside_questions(text: &str) -> Vec<Claim> {
    polarised(asserted_clauses(text, true))
}

fn polarised((clauses, lang): (Vec<Clause>, Lang)) -> Vec<Claim> {
    let mut out = claims(&clauses, lang);
    // Polarity: a change whose new value is the one negated ("been on X for a month,
    // haven't opened Y once") has its two values the wrong way round.
    for c in &mut out {
        if let Some(old) = c.old.clone()
            && c.op == Op::Set
            && negated_before(&c.clause, &c.value)
            && !negated_before(&c.clause, &old)
        {
            c.old = Some(std::mem::replace(&mut c.value, old));
        }
    }
    out
}

/// The known values of `slot` (its gazetteer: programming languages, databases, diets,
/// …; canonical) that `text` names in what it asserts: not in a question, a hypothetical
/// or a denied aside ("Learning curve on Zig is steep but it's what I use daily now"
/// names Zig; "should I try Zig?" and "If we moved to Zig …" do not). Empty for a slot
/// without a gazetteer or an unknown slot.
pub fn named_values(text: &str, slot: &str) -> Vec<String> {
    let Some(k) = SLOTS.iter().position(|d| d.id == slot).filter(|&k| !GAZETTEERS[k].is_empty()) else { return Vec::new() };
    // Most texts name no value: look for an entry's first word before tokenising.
    static FIRST_WORDS: LazyLock<Vec<std::collections::HashSet<String>>> =
        LazyLock::new(|| GAZETTEERS.iter().map(|g| g.iter().filter_map(|(w, _)| w.first().cloned()).collect()).collect());
    let lower = text.replace('\u{2019}', "'").to_lowercase();
    let named = |raw: &str| {
        // As `tokenize` trims a word, with or without a possessive "'s".
        let w = raw.trim_matches(|c: char| !(c.is_alphanumeric() || c == '+' || c == '#'));
        FIRST_WORDS[k].contains(w) || w.strip_suffix("'s").is_some_and(|b| FIRST_WORDS[k].contains(b))
    };
    if !lower.split_whitespace().any(named) {
        return Vec::new();
    }
    let (clauses, _) = asserted_clauses(text, false);
    let mut out: Vec<String> = Vec::new();
    // Only what the speaker says of themselves: a first-person word ("it's what I use")
    // or a verb that drops its "I" ("Ripped out X", "Been doing X since march"), and no
    // one else as the subject ("my roommate has gone dairy-free"). A request ("explain
    // kubernetes operators") or someone else's habit ("Kofi keeps pitching DynamoDB")
    // names a value the speaker does not hold.
    for c in &clauses {
        let lead = c.toks.iter().find(|t| !is_word(t, &["oh", "so", "and", "but", "well", "also", "btw", "und"]));
        let own = c.toks.iter().any(|t| is_word(t, FIRST_PERSON) || is_word(t, POSSESSIVE))
            || lead.is_some_and(|t| looks_like_a_verb(t) && !is_word(t, &["no", "not", "never"]));
        // "my old roommate", "our new neighbour": a relation a word or two after "my".
        let relation = c.toks.windows(3).any(|w| is_word(&w[0], POSSESSIVE) && (is_relation(&w[1]) || is_relation(&w[2])));
        if !own || relation || matches!(subject(&c.toks, &SLOTS[k]), Ok(Some(_))) {
            continue;
        }
        for (_, _, _, canonical) in gazetteer_hits(&c.toks, k) {
            if !out.contains(&canonical) {
                out.push(canonical);
            }
        }
    }
    out
}

/// Whom a question asks about: `Some(true)` the speaker (the user: a first-person word or
/// "the user", as in "what's my dog called", "the user's editor"), `Some(false)` someone
/// they know ("my sister's dog", "my best mate's job"), `None` neither (a name).
pub fn asks_about_speaker(question: &str) -> Option<bool> {
    let toks = tokenize(&question.replace('\u{2019}', "'"), &stemmer(Lang::En));
    let relation = (0..toks.len()).any(|i| is_word(&toks[i], POSSESSIVE) && toks[i + 1..].iter().take(2).any(is_relation));
    let speaker = toks.iter().any(|t| is_word(t, FIRST_PERSON) || is_word(t, POSSESSIVE) || is_word(t, &["user", "users", "mine"]));
    match (relation, speaker) {
        (true, _) => Some(false),
        (false, true) => Some(true),
        (false, false) => None,
    }
}

/// Whether `text` tells of someone else and not of the speaker: it opens with a name or
/// one of the speaker's people followed by a verb ("Dariusz wrote a whole game engine in
/// Lua", "My neighbour makes amazing tacos") and has no other word of the speaker's. A
/// name that is a known value of a slot ("DynamoDB handles everything now") is the
/// speaker's thing, not a person, and a verb or a word of the lexicon first ("Walked
/// Juniper for an hour", "Sorry jollof rice, …") is no name. What someone else does puts
/// none of the speaker's facts in doubt.
pub fn tells_of_someone_else(text: &str) -> bool {
    let text = text.replace(['\u{2019}', '\u{2018}'], "'");
    let lang = language(&text);
    let toks = tokenize(&text, &stemmer(lang));
    if toks.iter().any(|t| is_word(t, FIRST_PERSON) || is_word(t, &["mine", "i'm", "i've", "i'd", "i'll"])) {
        return false;
    }
    let possessives = toks.iter().filter(|t| is_word(t, POSSESSIVE)).count();
    let Some(first) = toks.first() else { return false };
    let end = if is_word(first, POSSESSIVE) && possessives == 1 {
        // One of the speaker's people ("My sister is dating someone called Sofia", "my
        // best mate moved to Leeds"); "my partner is Jonas" names the speaker's own slot.
        match (1..3).find(|&i| toks.get(i).is_some_and(is_relation)) {
            Some(i) => i + 1,
            None => return false,
        }
    } else {
        if possessives > 0 || !first.cap || is_word(first, NOT_NAMES) || is_lexicon_word(first) || looks_like_a_verb(first) {
            return false;
        }
        let end = toks.iter().position(|t| !t.cap || is_word(t, NOT_NAMES) || is_lexicon_word(t)).unwrap_or(toks.len());
        if (0..SLOTS.len()).any(|k| gazetteer_hits(&toks[..end], k).first().is_some_and(|h| h.0 == 0)) {
            return false;
        }
        end
    };
    let verb = toks[end..].iter().find(|t| !is_word(t, &["just", "still", "also", "really", "finally", "now", "always", "never"]));
    verb.is_some_and(|x| {
        !x.cap
            && (is_word(x, IRREGULAR_PAST)
                || is_word(x, &["is", "was", "has", "does", "keeps", "says", "wants", "thinks"])
                || (x.lower.len() > 3 && (x.lower.ends_with("ed") || (x.lower.ends_with('s') && !x.lower.ends_with("ss")))))
    })
}

/// Whether `text` only supposes or asks: every sentence opens with "if", "suppose",
/// "imagine", … ("If we ever get a second cat I'm calling her Clementine") or asks. Such
/// words say what the speaker considers, not what is true.
pub fn asserts_nothing(text: &str) -> bool {
    let text = text.replace(['\u{2019}', '\u{2018}'], "'");
    let stem = stemmer(language(&text));
    let all = sentences(&text);
    !all.is_empty() && all.iter().all(|sentence| sentence.contains('?') || supposes(&tokenize(sentence, &stem)))
}

/// Whether a sentence (or its first clause) opens with "if", "suppose", "imagine", … after
/// a filler ("so", "but", …): all of it is hypothetical.
fn supposes(toks: &[Tok]) -> bool {
    let Some(at) = toks.iter().position(|t| !is_word(t, &["oh", "so", "and", "but", "well", "und", "also", "let's"])) else {
        return false;
    };
    let lead = &toks[at];
    // "Say we moved to Exoscale; would the DNS setup change?", "Let's say …".
    let say = lead.lower == "say" && (at == 0 || toks[0].lower == "let's");
    // "Were I to retrain as …", "Had we stayed in …", "Should I ever …": an inverted conditional.
    let inverted =
        is_word(lead, &["were", "had", "should"]) && toks.get(at + 1).is_some_and(|n| is_word(n, &["i", "we", "you", "they", "he", "she"]));
    is_word(lead, &["if", "wenn", "falls", "suppose", "imagine", "unless"]) || say || inverted
}

/// The clauses of `text` that assert something (questions and hypotheticals left out),
/// tokenised, and the text's language. Of a sentence that asks (a `?`), only the clauses
/// before the one that asks, when each states rather than asks or requests ("Anniversary
/// coming up with Maelys (my partner), any gift ideas?"). `asking_only`: the sentences
/// that ask, nothing else.
fn asserted_clauses(text: &str, asking_only: bool) -> (Vec<Clause>, Lang) {
    let text = text.replace(['\u{2019}', '\u{2018}'], "'").replace(['\u{201c}', '\u{201d}', '\u{201e}'], "\"");
    let text = asides(&text);
    let lang = language(&text);
    let stem = stemmer(lang);
    let lower_case = !text.chars().any(char::is_uppercase);
    let mut clauses: Vec<Clause> = Vec::new();
    for sentence in sentences(&text) {
        let asking = sentence.contains('?');
        if asking_only && !asking {
            continue;
        }
        let mut first = true;
        let mut sentence_start = true;
        // A correction is one statement however it punctuates ("Scratch what I said, X was
        // wrong, it's Y").
        let whole = [sentence.trim().to_string()];
        let mut parts = if correction(sentence).is_some() && !asking { whole.to_vec() } else { split_clauses(sentence) };
        if asking {
            // The clauses before the one that asks ("…, any gift ideas?" asks after its
            // last comma), up to the first that asks or requests (below).
            if let Some((head, _)) = parts.pop().as_deref().and_then(|last| last.rsplit_once(',')) {
                parts.push(head.to_string());
            }
        }
        for clause in parts {
            let mut toks = tokenize(&clause, &stem);
            if lower_case {
                assume_capitals(&mut toks);
            }
            if toks.is_empty() {
                continue;
            }
            if asking && (clause.contains('?') || asks(&toks, true, lang) || requests(&toks)) {
                break;
            }
            // "If I moved to X, …": the whole sentence is hypothetical.
            if first && supposes(&toks) {
                break;
            }
            first = false;
            // "I could eat X every single day", "I'd pick X any time": habits, not hypotheses.
            let habit = toks.windows(2).any(|w| w[0].lower == "every" && is_word(&w[1], &["day", "single", "week", "morning"]))
                || toks.iter().any(|t| is_word(t, &["anytime", "daily"]))
                || toks.windows(2).any(|w| w[0].lower == "any" && w[1].lower == "time");
            let rather = toks.iter().any(|t| t.lower == "rather");
            let hypothetical = toks.iter().any(|t| is_word(t, HYPOTHETICAL) && !((habit || rather) && is_word(t, &["could", "would"])));
            let question = asks(&toks, sentence_start, lang);
            sentence_start = false;
            if hypothetical || question {
                continue;
            }
            clauses.push(Clause { text: clause.trim().to_string(), toks });
        }
    }
    (clauses, lang)
}

/// Parenthetical asides: one that denies ("… (not that it matters lol)") says nothing
/// about the sentence, so it goes before a negation in it can leak into the clause; an
/// apposition that names a relation ("Dario (my partner)") is read as "my partner Dario".
fn asides(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(len) = rest[open..].find(')') else { break };
        let (before, inner, after) = (&rest[..open], &rest[open + 1..open + len], &rest[open + len + 1..]);
        // An aside opens after a space (":(" is a face) and holds no other bracket.
        let aside = before.chars().next_back().is_none_or(char::is_whitespace) && !inner.contains('(') && inner.chars().count() <= 60;
        if !aside {
            out.push_str(&rest[..open + 1]);
            rest = &rest[open + 1..];
            continue;
        }
        let lower = inner.to_lowercase();
        let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).collect();
        let denies = words.iter().any(|w| ["not", "no", "never", "nicht", "kein", "keine"].contains(w) || w.ends_with("n't"));
        let name = before.trim_end().rsplit(char::is_whitespace).next().filter(|w| w.chars().next().is_some_and(char::is_uppercase));
        let relation = (words.first().is_some_and(|w| ["my", "our", "mein", "meine", "unser", "unsere"].contains(w)) && words.len() <= 4)
            .then_some(inner.trim());
        match (denies, name, relation) {
            (true, ..) => out.push_str(before.trim_end()),
            (false, Some(name), Some(relation)) => {
                out.push_str(&before.trim_end()[..before.trim_end().len() - name.len()]);
                out.push_str(&format!("{relation} {name}"));
            }
            _ => out.push_str(&rest[..open + len + 1]),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Whether `value` appears in `clause` right after a negation: one of the three words
/// before it denies ("not", "never", "no", "-n't", "nicht", "kein…").
fn negated_before(clause: &str, value: &str) -> bool {
    let lower = clause.to_lowercase();
    let value = value.to_lowercase();
    // The value as a whole word ("go" is not in "going", "java" not in "javascript").
    let whole = |at: usize| {
        lower[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
            && lower[at + value.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric())
    };
    let Some(at) = lower.match_indices(&value).map(|(i, _)| i).find(|&i| whole(i)) else { return false };
    lower[..at].split_whitespace().rev().take(3).any(|w| {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        w.ends_with("n't")
            || w.ends_with("nt") && ["dont", "didnt", "havent", "cant", "wont", "isnt", "arent"].contains(&w)
            || ["not", "never", "no", "nicht", "kein", "keine", "keinen", "nie"].contains(&w)
    })
}

struct Clause {
    text: String,
    toks: Vec<Tok>,
}

/// A clause that asks: an inverted verb or a question word first ("Is X …", "Should I
/// …", "what editor does sam use"). At the start of a sentence the word's case does not
/// matter (chat is often all lower case); inside one only a capitalised word counts, so
/// "…, which was hard" stays a statement. English "was" is a verb, not German "was".
fn asks(toks: &[Tok], sentence_start: bool, lang: Lang) -> bool {
    let lead = toks.iter().find(|t| !is_word(t, &["so", "and", "but", "oh", "also", "und", "hey", "hi", "ok", "okay"]));
    lead.is_some_and(|t| is_word(t, INTERROGATIVE) && (t.cap && !t.lowered || sentence_start) && !(lang == Lang::En && t.lower == "was"))
}

/// Words that say nothing by themselves: greetings, thanks, assent.
const COURTESY: &[&str] = &[
    "hi", "hello", "hey", "thanks", "thank", "you", "thx", "ty", "ok", "okay", "cool", "great", "nice", "sure", "yes", "no", "yeah",
    "hallo", "danke", "super", "gut", "ja", "nein", "morning", "good", "so", "well", "hmm", "oh",
];

/// Verbs that open a request to the assistant ("recommend a podcast", "help me name my
/// wifi network", "summarize the pros and cons"): the imperative, which in chat asks
/// for something and states nothing.
const REQUESTS: &[&str] = &[
    "recommend",
    "suggest",
    "give",
    "help",
    "summarize",
    "summarise",
    "explain",
    "write",
    "draft",
    "tell",
    "list",
    "translate",
    "show",
    "compare",
    "generate",
    "create",
    "describe",
    "rewrite",
    "review",
    "outline",
    "brainstorm",
    "convert",
    "calculate",
    "teach",
    "proofread",
    "simplify",
    "shorten",
    "debug",
    "refactor",
    "find",
    "name",
    "plan",
    "remind",
    "fix",
    "check",
    "draw",
    "pick",
    "empfiehl",
    "erkläre",
    "erklär",
    "schreib",
    "schreibe",
    "gib",
    "hilf",
    "fasse",
    "übersetze",
    "zeig",
    "nenne",
];

/// A sentence that only asks something of the assistant: a request verb first ("pls
/// give me three icebreakers"), or thanks without a word about the speaker ("thx that
/// helped a lot").
fn requests(toks: &[Tok]) -> bool {
    let lead = toks.iter().position(|t| !is_word(t, &["pls", "please", "ok", "okay", "so", "hey", "now", "also", "and", "then", "bitte"]));
    let Some(lead) = lead else { return false };
    let first = &toks[lead];
    let thanks = is_word(first, &["thanks", "thank", "thx", "ty", "cheers", "danke"])
        && !toks.iter().any(|t| is_word(t, &["i", "my", "we", "our", "ich", "mein", "meine", "wir"]));
    // A verb that is also a noun ("Help desk job at Globex starts Monday", "Name's Dana",
    // "Plan B fell through") requests only with its object after it: "help me …",
    // "name my …", "plan a …".
    let next = toks.get(lead + 1);
    let object = next.is_some_and(|n| {
        is_word(
            n,
            &["me", "us", "a", "an", "the", "my", "our", "some", "three", "two", "five", "ten", "mir", "uns", "einen", "eine", "ein"],
        )
    });
    let noun_too =
        is_word(first, &["help", "list", "name", "plan", "check", "fix", "draft", "review", "outline", "show", "pick", "find", "draw"]);
    let request = is_word(first, REQUESTS) && (object || (!noun_too && next.is_some_and(|n| n.lower != "'s" && n.lower != "is")));
    thanks || request
}

/// Whether a message only asks: every sentence is a question (a `?`, or a question word
/// or inverted verb first), a request to the assistant or thanks. Such a message states
/// no fact, and is not recalled as a memory of what the user knows.
pub fn is_question(text: &str) -> bool {
    let text = text.replace(['\u{2019}', '\u{2018}'], "'");
    let lang = language(&text);
    let stem = stemmer(lang);
    // Courtesy around a question ("Thanks! Any tips?") does not make it a statement.
    let sentences: Vec<&str> = sentences(&text)
        .into_iter()
        .filter(|s| !tokenize(s, &stem).iter().filter(|t| t.text.chars().any(char::is_alphanumeric)).all(|t| is_word(t, COURTESY)))
        .collect();
    !sentences.is_empty()
        && sentences.iter().all(|sentence| {
            // Every clause asks: "which reminds me, I use Helix now" states something.
            let clauses: Vec<Vec<Tok>> = split_clauses(sentence).iter().map(|c| tokenize(c, &stem)).filter(|t| !t.is_empty()).collect();
            // A question word first governs the sentence ("how do I tell a coworker their
            // mic is always muted"), unless a later clause speaks of the speaker ("which
            // reminds me, I use Helix now").
            let led = clauses.first().is_some_and(|t| asks(t, true, lang))
                && !clauses.iter().skip(1).any(|t| t.iter().any(|w| is_word(w, &["i", "we", "ich", "wir"])));
            sentence.contains('?') || requests(&tokenize(sentence, &stem)) || led
        })
}

fn language(text: &str) -> Lang {
    let lower = text.to_lowercase();
    let n = lower.split(|c: char| !c.is_alphanumeric() && c != 'ß').filter(|w| GERMAN_MARKERS.contains(w)).count();
    let umlaut = lower.contains(['ä', 'ö', 'ü', 'ß']);
    if n >= 2 || (n >= 1 && umlaut) { Lang::De } else { Lang::En }
}

/// Sentences end at `.`, `!` or `?` followed by whitespace or the end (so "Fly.io" and
/// "3.5" stay whole); the terminator stays with its sentence.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (i, &(at, c)) in chars.iter().enumerate() {
        let next_blank = chars.get(i + 1).is_none_or(|(_, n)| n.is_whitespace());
        if matches!(c, '.' | '!' | '?' | '\n') && next_blank {
            let end = at + c.len_utf8();
            if !text[start..end].trim().is_empty() {
                out.push(&text[start..end]);
            }
            start = end;
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(&text[start..]);
    }
    out
}

/// Clauses: split on `;`, `:`, dashes, and on a comma that starts a new statement
/// (", so", ", I …", ", it's …").
fn split_clauses(sentence: &str) -> Vec<String> {
    const OPENERS: &[&str] = &[
        "i",
        "after",
        "don't",
        "they're",
        "she's",
        "he's",
        "no",
        "i'm",
        "i've",
        "i'd",
        "we",
        "we're",
        "we've",
        "ich",
        "wir",
        "so",
        "but",
        "aber",
        "sadly",
        "only",
        "mostly",
        "it's",
        "it",
        "they",
        "call",
        "which",
        "now",
        "and",
        "everyone",
        "nobody",
        "everything",
        "leider",
        "jetzt",
        "please",
        "though",
        "while",
        "whereas",
        "since",
        "because",
        "da",
        "weil",
        "sondern",
    ];
    let mut parts = Vec::new();
    let sentence = sentence.replace(" but ", ", but ").replace(" aber ", ", aber ");
    for piece in sentence.split([';', ':', '—', '–']) {
        let mut start = 0;
        let bytes = piece.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b',' {
                let rest = piece[i + 1..].trim_start();
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '\'')
                    .collect::<String>()
                    .replace('\u{2019}', "'")
                    .to_lowercase();
                if OPENERS.contains(&word.as_str()) {
                    parts.push(piece[start..i].to_string());
                    start = i + 1;
                }
            }
            i += 1;
        }
        parts.push(piece[start..].to_string());
    }
    parts.into_iter().filter(|p| p.chars().any(char::is_alphanumeric)).collect()
}

/// Words (with their inner `.`, `+`, `#`, `'`, `-`: "Fly.io", "C++", "don't"), contractions
/// expanded ("I'm" → I am, "don't" → do not) and commas kept as tokens (lists).
fn tokenize(clause: &str, stem: &Stemmer) -> Vec<Tok> {
    let mut out = Vec::new();
    let push = |out: &mut Vec<Tok>, w: &str| {
        if w.is_empty() {
            return;
        }
        let lower = w.to_lowercase();
        let cap = w.chars().next().is_some_and(char::is_uppercase) || w.chars().skip(1).any(char::is_uppercase);
        out.push(Tok { text: w.to_string(), stem: stem.stem(&lower).into_owned(), lower, cap, lowered: false });
    };
    for raw in clause.split_whitespace() {
        if raw == "&" {
            push(&mut out, "&");
            continue;
        }
        let trailing_comma = raw.trim_end_matches(['.', '!', '"', ')']).ends_with(',');
        let w = raw.trim_matches(|c: char| !(c.is_alphanumeric() || c == '+' || c == '#'));
        let w = if w.ends_with('+') || w.ends_with('#') { w } else { w.trim_end_matches(['+', '#']) };
        let lower = w.to_lowercase();
        let split =
            |suffix: &str, expansion: &str| lower.strip_suffix(suffix).filter(|b| !b.is_empty()).map(|b| (b.len(), expansion.to_string()));
        // "can't", "won't": the modal, then "not" ("Can't go near kiwi" has no "Ca").
        let modal = match lower.as_str() {
            "can't" => Some("can"),
            "won't" => Some("will"),
            _ => None,
        };
        if let Some(modal) = modal {
            let mut modal = modal.to_string();
            if w.starts_with(char::is_uppercase) {
                modal[..1].make_ascii_uppercase();
            }
            push(&mut out, &modal);
            push(&mut out, "not");
            if trailing_comma {
                push(&mut out, ",");
            }
            continue;
        }
        let contraction = split("n't", "not")
            .or_else(|| split("'m", "am"))
            .or_else(|| split("'re", "are"))
            .or_else(|| split("'ve", "have"))
            .or_else(|| split("'ll", "will"))
            .or_else(|| split("'d", "would"))
            .or_else(|| {
                ["it's", "that's", "he's", "she's", "there's", "what's", "here's", "who's", "everything's"]
                    .contains(&lower.as_str())
                    .then(|| (lower.len() - 2, "is".to_string()))
            });
        match contraction {
            Some((n, expansion)) => {
                push(&mut out, &w[..n]);
                push(&mut out, &expansion);
            }
            None => match lower.strip_suffix("'s").or_else(|| lower.strip_suffix("s'")) {
                // "Tiago's dog": the possessor, marked by a following "'s" token.
                Some(base) if !base.is_empty() => {
                    push(&mut out, &w[..base.len()]);
                    push(&mut out, "'s");
                }
                _ => push(&mut out, w),
            },
        }
        if trailing_comma {
            push(&mut out, ",");
        }
    }
    // "My flat's in Utrecht", "my role's product designer": "'s" before a preposition,
    // an article or a lower-case word that is not a noun of the possessor is "is".
    for i in 0..out.len() {
        if out[i].lower == "'s"
            && out.get(i + 1).is_some_and(|n| {
                is_word(n, &["in", "at", "on", "a", "an", "the", "now", "not", "still", "all", "from", "with"])
                    || (!n.cap && is_word(n, JOB_WORDS_AFTER_IS))
            })
        {
            out[i] = Tok { text: "is".into(), lower: "is".into(), stem: "is".into(), cap: false, lowered: false };
        }
    }
    out
}

/// Words that follow "X's" as "X is" rather than a possession ("my role's product designer").
const JOB_WORDS_AFTER_IS: &[&str] = &["product", "senior", "junior", "lead", "head", "chief", "staff", "principal"];

/// An all-lower-case message: names are written without capitals, so any word that is
/// not a function word may be one (one word at a time).
fn assume_capitals(toks: &mut [Tok]) {
    for t in toks.iter_mut() {
        let function = is_word(t, STOP)
            || is_word(t, SKIP)
            || is_word(t, FIRST_PERSON)
            || is_word(t, POSSESSIVE)
            || is_word(t, NOT_NAMES)
            || is_relation(t)
            || is_word(t, HYPOTHETICAL)
            || is_lexicon_word(t)
            || is_word(t, CASUAL)
            || t.text == ",";
        if !t.cap && !function && t.text.chars().next().is_some_and(char::is_alphabetic) {
            t.cap = true;
            t.lowered = true;
        }
    }
}

/// Chat words that are never values.
const CASUAL: &[&str] =
    &["btw", "lol", "tbh", "pls", "please", "haha", "ok", "okay", "yeah", "yep", "though", "anyway", "don't", "ask", "fyi", "imo"];

/// Where a phrase (stems) occurs in the tokens: the index after its last word.
fn find_phrase(toks: &[Tok], phrase: &[String]) -> Option<(usize, usize)> {
    if phrase.is_empty() || phrase.len() > toks.len() {
        return None;
    }
    // Up to two filler words may stand between a phrase's words: "arbeite nicht mehr bei",
    // "am not a", "berichte jetzt an".
    for i in 0..toks.len() {
        if toks[i].stem != phrase[0] {
            continue;
        }
        let mut at = i + 1;
        let mut ok = true;
        for p in &phrase[1..] {
            let mut gap = 0;
            while at < toks.len() && toks[at].stem != *p && gap < 2 && is_word(&toks[at], FILLERS) {
                at += 1;
                gap += 1;
            }
            if at < toks.len() && toks[at].stem == *p {
                at += 1;
            } else {
                ok = false;
                break;
            }
        }
        if ok {
            return Some((i, at));
        }
    }
    None
}

/// Words that may stand inside a cue phrase.
const FILLERS: &[&str] = &[
    "not",
    "no",
    "longer",
    "now",
    "still",
    "really",
    "just",
    "also",
    "currently",
    "finally",
    "mostly",
    "mainly",
    "nicht",
    "mehr",
    "jetzt",
    "noch",
    "auch",
    "schon",
    "inzwischen",
    "mittlerweile",
    "hauptsächlich",
    "never",
    "already",
    "officially",
    "is",
    "are",
    "am",
    "was",
    "nun",
    "gerade",
    "seit",
    "kurzem",
    "ich",
    "wir",
    "du",
];

/// Gazetteer values of a slot in the clause: (start, end, text as written, canonical).
fn gazetteer_hits(toks: &[Tok], slot: usize) -> Vec<(usize, usize, String, String)> {
    let entries = &GAZETTEERS[slot];
    let mut hits = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let best = entries
            .iter()
            .filter(|(w, _)| i + w.len() <= toks.len() && w.iter().enumerate().all(|(k, word)| toks[i + k].lower == *word))
            .max_by_key(|(w, _)| w.len());
        match best {
            // One-letter languages ("C", "R", "V", "D") only when written as capitals.
            Some((w, _)) if w.len() == 1 && w[0].chars().count() == 1 && !toks[i].text.chars().all(char::is_uppercase) => i += 1,
            // Place names are written with a capital ("split up" is not Split), and so is a
            // value that is also a common verb ("Can't go near kiwi" is not Go).
            Some(_) if (SLOTS[slot].id == "city" || toks[i].lower == "go") && !toks[i].cap => i += 1,
            Some((w, canonical)) => {
                let text = toks[i..i + w.len()].iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ");
                let canonical = canonical.clone().unwrap_or_else(|| w.join(" "));
                hits.push((i, i + w.len(), text, canonical));
                i += w.len();
            }
            None => i += 1,
        }
    }
    hits
}

/// Who the clause is about: `Ok(None)` the speaker, `Ok(Some(name))` someone else,
/// `Err(())` no one the extractor can tell (an impersonal statement).
fn subject(toks: &[Tok], slot: &SlotDef) -> Result<Option<String>, ()> {
    // "my sister", "a friend of mine", "Tiago's", "Bruno": someone else, if they come
    // before the first-person words.
    // A name after the clause's verb is its object ("Got hired by Tessellate"), not its
    // subject.
    let mut after_verb = false;
    for (i, t) in toks.iter().enumerate() {
        if is_word(t, FIRST_PERSON) {
            return Ok(None);
        }
        // "Someone on my team is a principal engineer": no one the memory knows.
        if !after_verb && is_word(t, INDEFINITE) {
            return Ok(Some(t.lower.clone()));
        }
        if i == 0 && t.cap && looks_like_a_verb(t) {
            after_verb = true;
            continue;
        }
        if is_word(t, POSSESSIVE) {
            // "my best mate", "my old roommate": a word before the relation describes it.
            if toks.get(i + 2).is_some_and(is_relation) && toks.get(i + 1).is_some_and(|a| !a.cap && !is_relation(a)) {
                return Ok(Some(format!("{} {} {}", t.lower, toks[i + 1].lower, toks[i + 2].lower)));
            }
            let noun = toks.get(i + 1);
            // "my partner works at X": the partner does; "my partner is X", "my cat Pixel",
            // "my partner Sofia and I": the speaker's slot. Where a project's things live
            // ("our stuff lives on X", "my side thing runs on X"), whatever the noun, the
            // project is the speaker's unless it is someone's ("my brother's app").
            if noun.is_some_and(|n| is_word(n, PROJECT_WORDS) || (slot.project && !is_relation(n) && !n.cap)) {
                // "our app runs on X", "our team uses X": the speaker's project.
                return Ok(None);
            }
            // "my title changed to …", "my database is …": a thing of the speaker's.
            let thing = |n: &Tok| {
                SLOTS
                    .iter()
                    .filter(|d| !PERSON_SLOTS.contains(&d.id))
                    .any(|d| d.nouns.iter().any(|x| x.split_whitespace().next() == Some(n.lower.as_str())))
            };
            if noun.is_some_and(thing) {
                return Ok(None);
            }
            if let Some(n) = noun.filter(|n| !is_relation(n) && !is_word(n, FIRST_PERSON)) {
                // The possessed phrase: adjectives, then the longest slot noun here
                // ("favourite food"), else one word.
                let mut i = i;
                while toks.get(i + 2).is_some() && is_word(&toks[i + 1], ADJECTIVES) {
                    i += 1;
                }
                let end = SLOTS
                    .iter()
                    .flat_map(|d| d.nouns)
                    .map(|noun| noun.split_whitespace().collect::<Vec<_>>())
                    .filter(|w| w.iter().enumerate().all(|(k, word)| toks.get(i + 1 + k).is_some_and(|t| t.lower == *word)))
                    .map(|w| i + 1 + w.len())
                    .max()
                    .unwrap_or(i + 2);
                let next = toks.get(end);
                // A finite verb: "works", "moved", "left", "says" (a noun such as "job"
                // in "my day job" is not one).
                let verb = next.is_some_and(|x| {
                    !x.cap
                        && (is_word(x, IRREGULAR_PAST)
                            || (x.lower.len() > 3 && x.lower.ends_with('s') && !x.lower.ends_with("ss"))
                            || x.lower.ends_with("ed"))
                        && !is_word(x, COPULAS)
                        && !is_word(
                            x,
                            &["of", "for", "at", "in", "from", "with", "on", "to", "now", "just", "really", "still", "von", "bei", "jetzt"],
                        )
                        && x.text != ","
                        && x.lower != "'s"
                        // "my leisure activities are …": a plural noun before its verb.
                        && !toks.get(end + 1).is_some_and(|y| is_word(y, COPULAS))
                });
                if verb && !toks[end..].iter().any(|x| is_word(x, FIRST_PERSON)) {
                    let phrase = toks[i + 1..end].iter().map(|t| t.lower.as_str()).collect::<Vec<_>>().join(" ");
                    return Ok(Some(format!("{} {phrase}", t.text.to_lowercase())));
                }
                if !is_relation(n) {
                    return Ok(None);
                }
            }
            if let Some(n) = noun.filter(|n| is_relation(n)) {
                let mut who = format!("{} {}", t.text.to_lowercase(), n.lower);
                if toks.get(i + 2).is_some_and(|x| x.lower == "'s") {
                    who.push_str("'s");
                }
                return Ok(Some(who));
            }
            return Ok(None);
        }
        if t.lower == "a" && toks.get(i + 1).is_some_and(is_relation) {
            return Ok(Some(format!("a {}", toks[i + 1].lower)));
        }
        if is_word(t, GENERIC_SUBJECTS) {
            return Ok(None);
        }
        if i == 0
            && is_word(t, &["he", "she", "they", "him", "her", "them", "er", "sie"])
            && !toks.iter().any(|x| is_word(x, FIRST_PERSON) || is_word(x, POSSESSIVE))
        {
            // Someone named before ("my grandmother …, so she's …"): not the speaker.
            return Ok(Some(t.lower.clone()));
        }
        if is_word(t, &["you", "your", "du", "dein"]) && !toks.iter().any(|x| is_word(x, &["me", "my", "mich", "mir", "mein"])) {
            // Addressed to the assistant ("pretend you're a chef from Lyon").
            return Ok(Some("you".into()));
        }
        if !t.cap && !is_word(t, NOT_NAMES) && !is_word(t, SKIP) && !is_word(t, ADJECTIVES) && t.text != "," {
            after_verb = true;
        }
        if t.cap && !is_word(t, NOT_NAMES) && !is_lexicon_word(t) && !after_verb {
            // A typed value first ("Postgres runs on port 5432") is what the clause is
            // about, unless the speaker's words follow ("Zed is my editor"); the claims
            // then drop it (a value is not its own subject).
            let _ = slot;
            let mut end = i + 1;
            while end < toks.len() && toks[end].cap && !is_word(&toks[end], NOT_NAMES) && !is_lexicon_word(&toks[end]) {
                end += 1;
            }
            let name = toks[i..end].iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ");
            // "{Name} is no longer my manager": the name is the value of the user's slot.
            if toks[end..].iter().any(|x| is_word(x, POSSESSIVE) || is_word(x, FIRST_PERSON)) {
                return Ok(None);
            }
            return Ok(Some(name));
        }
        if slot.project && PROJECT_WORDS.contains(&t.lower.as_str()) {
            return Ok(None);
        }
    }
    Err(())
}

/// A word for someone the speaker knows: "sister", "mate", "stepdad", "grandson",
/// "sister-in-law".
fn is_relation(t: &Tok) -> bool {
    let w = t.lower.as_str();
    let base = w.strip_prefix("step").or_else(|| w.strip_prefix("grand")).or_else(|| w.strip_prefix("half-")).unwrap_or(w);
    RELATIONS.contains(&w) || RELATIONS.contains(&base) || w.ends_with("-in-law")
}

/// Past forms that do not end in "-ed".
const IRREGULAR_PAST: &[&str] = &[
    "left", "took", "went", "got", "made", "came", "ran", "ate", "said", "told", "found", "met", "quit", "became", "began", "bought",
    "sold", "fell", "gave", "had", "kept", "knew", "lost", "paid", "put", "saw", "sent", "spent", "won", "wrote",
];

/// Slots whose nouns name a person or an animal, who may do things themselves ("my
/// partner works at …").
const PERSON_SLOTS: &[&str] = &["partner", "manager", "pet"];

/// Adjectives between a possessive and its noun ("my new boss", "our current database").
const ADJECTIVES: &[&str] = &[
    "new",
    "old",
    "current",
    "direct",
    "main",
    "former",
    "latest",
    "first",
    "second",
    "little",
    "big",
    "lovely",
    "beloved",
    "real",
    "actual",
    "day-to-day",
    "neuer",
    "neue",
    "neues",
    "alter",
    "alte",
    "jetziger",
    "jetzige",
];

const COPULAS: &[&str] = &["is", "was", "am", "are", "heißt", "ist", "called", "named", "namens", "and", "und"];

/// A word of the lexicon (a cue or a slot's noun): not a name even when capitalised
/// ("Home is Bergen", "Native Tagalog speaker").
fn is_lexicon_word(t: &Tok) -> bool {
    static WORDS: LazyLock<std::collections::HashSet<&'static str>> =
        LazyLock::new(|| SLOTS.iter().flat_map(|s| s.cues.iter().chain(s.nouns).flat_map(|c| c.split_whitespace())).collect());
    WORDS.contains(t.lower.as_str())
}

/// How strongly the clause states each slot, with the position its value follows.
fn score(toks: &[Tok], lang: Lang, k: usize, speaker_speaks: bool) -> (f64, Option<usize>) {
    let compiled = match lang {
        Lang::En => &lexicon(Lang::En).slots[k],
        Lang::De => &lexicon(Lang::De).slots[k],
    };
    let mut s = 0.0;
    let mut anchor = None;
    let has_noun = compiled.nouns.iter().any(|n| find_phrase(toks, n).is_some());
    for (cue, needs_noun) in compiled.cues.iter().zip(&compiled.needs_noun) {
        if *needs_noun && !has_noun {
            continue;
        }
        if let Some((_, end)) = find_phrase(toks, cue) {
            // A phrase is strong evidence; one word is, when a value of the slot's shape
            // follows it ("I joined Globex", not "I joined a gym").
            let named = SLOTS[k].shape == Shape::Name && value_after(toks, end, &SLOTS[k]).is_some_and(|(a, _)| a <= end + 2);
            let w = if cue.len() > 1 || named { 2.0 } else { 1.5 };
            if w > s {
                s = w;
                anchor = Some(end);
            }
        }
    }
    // "my manager", "our dog", "mein Chef": the slot named after a possessive.
    for noun in &compiled.nouns {
        if let Some((start, end)) = find_phrase(toks, noun) {
            let owns = |w: &Tok| is_word(w, POSSESSIVE);
            // "I have a new boss", "we got a puppy": possession by the speaker too.
            let have = |at: usize| {
                toks[..at].iter().any(|t| is_word(t, FIRST_PERSON))
                    && (1..=3).any(|k| {
                        at >= k
                            && is_word(&toks[at - k], &["have", "got", "habe", "haben"])
                            && toks[at - k + 1..at].iter().all(|t| is_word(t, &["a", "an", "new", "ein", "eine", "einen", "neuen", "neue"]))
                    })
            };
            let possessed = (start >= 1 && owns(&toks[start - 1]))
                || (start >= 2 && owns(&toks[start - 2]))
                || (start >= 3 && owns(&toks[start - 3]))
                || have(start);
            if possessed && s < 2.5 {
                s = 2.5;
                anchor = Some(end);
            }
        }
    }
    // The slot's noun without a possessive ("we adopted a puppy").
    if s > 0.0 && s < 2.5 && compiled.nouns.iter().any(|n| find_phrase(toks, n).is_some()) {
        s += 0.5;
    }
    let typed = (!GAZETTEERS[k].is_empty() && !gazetteer_hits(toks, k).is_empty())
        || (SLOTS[k].id == "diet" && diet(toks).is_some())
        || (SLOTS[k].id == "job_title" && !job_titles(toks).is_empty());
    // A typed value alone ("Golf uses the shared cache") says nothing about the speaker:
    // without a cue it needs the speaker's words ("we", "my") or their project's.
    let mine = speaker_speaks || toks.iter().any(|t| SLOTS[k].project && is_word(t, PROJECT_WORDS));
    // A city needs a cue ("my flight to Krakow got delayed" is no move).
    if typed && (s > 0.0 || (mine && SLOTS[k].id != "city")) {
        s += 1.5;
        // A change ("we switched …", "we're off AWS now") or a state of the speaker
        // ("I'm keto now", "plant-based all the way now").
        if toks.iter().any(|t| lexicon(lang).changes.contains(&t.stem)) || negated(toks, lang).is_some() {
            s += 1.0;
        } else if toks.iter().any(|t| is_word(t, &["now", "anymore", "jetzt", "mittlerweile", "inzwischen", "again", "wieder", "nowadays"]))
            || toks.windows(2).any(|w| w[0].lower == "these" && w[1].lower == "days")
            || (SLOTS[k].id != "city"
                && toks.iter().any(|t| is_word(t, FIRST_PERSON) || is_word(t, POSSESSIVE))
                && toks.iter().any(|t| is_word(t, &["am", "are", "is", "be", "bin", "sind", "ist", "follow", "ernähre"])))
        {
            s += 0.5;
        }
    }
    (s, anchor)
}

/// The end of a negating verb after which an old name follows: "left", "quit", "no longer at".
fn negated_at(toks: &[Tok]) -> Option<usize> {
    toks.iter().position(|t| is_word(t, &["left", "quit", "verlassen", "dropped", "ditched", "lost", "losing"])).or_else(|| {
        toks.windows(2).position(|w| w[0].lower == "no" && w[1].lower == "longer").map(|i| {
            // "no longer at X": the preposition too.
            if toks.get(i + 2).is_some_and(|t| is_word(t, &["at", "with", "in", "on", "bei"])) { i + 2 } else { i + 1 }
        })
    })
}

fn negated(toks: &[Tok], lang: Lang) -> Option<usize> {
    let list = &lexicon(lang).negations;
    let mut best: Option<usize> = None;
    for n in list {
        if let Some((start, _)) = find_phrase(toks, n) {
            best = Some(best.map_or(start, |b| b.min(start)));
        }
    }
    // "not … anymore", "don't … anymore", "kein … mehr": the words apart.
    let has = |w: &[&str]| toks.iter().position(|t| is_word(t, w));
    if let (Some(a), Some(_)) = (has(&["not", "nicht", "kein", "keine", "keinen", "never"]), has(&["anymore", "longer", "mehr"])) {
        best = Some(best.map_or(a, |b| b.min(a)));
    }
    if best.is_none()
        && let Some(a) = has(&["not", "nicht", "nobody", "no"])
    {
        best = Some(a);
    }
    best
}

/// A value after `from` (the name or noun phrase of the slot's shape).
fn value_after(toks: &[Tok], from: usize, def: &SlotDef) -> Option<(usize, usize)> {
    let mut i = from;
    loop {
        if i < toks.len() && (is_word(&toks[i], SKIP) || toks[i].text == ",") {
            i += 1;
        } else if let Some(n) = time_adverbial(&toks[i..]) {
            // "My favourite food these days is arepas": when, not what.
            i += n;
        } else {
            break;
        }
    }
    // A clause that opens with its verb ("Took Pepper to the vet") drops its "I": the
    // verb is no part of a name.
    if i == 0 && toks.first().is_some_and(|t| t.cap && !t.lowered && looks_like_a_verb(t) && !t.lower.ends_with("ing")) {
        i = 1;
    }
    let start = i;
    match def.shape {
        Shape::Name => {
            // Days, months and sentence words are not names ("on Friday").
            if toks.get(start).is_some_and(|t| is_word(t, NOT_NAMES) && t.lower != "i") {
                return None;
            }
            let mut end = start;
            while end < toks.len()
                && (toks[end].cap || toks[end].text.chars().any(|c| c.is_ascii_digit()))
                && toks[end].lower != "i"
                && !(end > start && (toks[end].lowered || is_word(&toks[end], CASUAL)))
            {
                end += 1;
                // "Stark & Sons", "Bank of Tallinn".
                if end + 1 < toks.len() && is_word(&toks[end], &["&", "of", "de", "van", "von", "y"]) && toks[end + 1].cap {
                    end += 1;
                }
            }
            (end > start && end - start <= 4).then_some((start, end))
        }
        Shape::Phrase => {
            let mut end = start;
            while end < toks.len() && end - start < 4 && !is_word(&toks[end], STOP) && toks[end].text != "," && toks[end].lower != "'s" {
                end += 1;
            }
            (end > start).then_some((start, end))
        }
    }
}

/// The length of a time adverbial at the start of `toks` ("these days", "lately", "right
/// now", "nowadays", "zurzeit"), if one stands there.
fn time_adverbial(toks: &[Tok]) -> Option<usize> {
    let first = toks.first()?;
    if is_word(first, &["lately", "nowadays", "recently", "atm", "currently", "zurzeit", "derzeit", "momentan", "neuerdings"]) {
        return Some(1);
    }
    let pair = toks
        .get(1)
        .is_some_and(|second| (first.lower == "these" && second.lower == "days") || (first.lower == "right" && second.lower == "now"));
    pair.then_some(2)
}

fn span(toks: &[Tok], (a, b): (usize, usize)) -> String {
    toks[a..b].iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Job titles: up to three words ending in a job noun ("QA lead", "staff engineer").
fn job_titles(toks: &[Tok]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let is_head = |t: &Tok| {
            JOB_HEADS.contains(&t.lower.as_str())
                || JOB_HEADS.iter().any(|h| h.len() > 5 && t.lower.ends_with(h) && t.lower.len() > h.len() + 3)
        };
        // "principal engineer": the compound's last noun is the head.
        if !is_head(t) || toks.get(i + 1).is_some_and(|n| n.lower == "'s" || is_head(n)) {
            continue;
        }
        // Not "my manager" (the manager slot), "my new manager", "it's my daily driver",
        // "as my primary editor" (things of the speaker's), "the developer of …".
        if (i >= 1 && toks[i - 1].lower == "'s") || toks[i.saturating_sub(2)..i].iter().any(|t| is_word(t, POSSESSIVE)) {
            continue;
        }
        let mut start = i;
        while start > 0
            && i - start < 2
            && !is_word(&toks[start - 1], STOP)
            && !is_word(&toks[start - 1], SKIP)
            && !is_word(&toks[start - 1], POSSESSIVE)
            && toks[start - 1].text != ","
            && !is_word(&toks[start - 1], &["made", "promoted", "title", "role", "position", "became", "als", "bin"])
        {
            start -= 1;
        }
        // "Head of Product", "VP of Sales Engineering": the head's "of" and the field it
        // names, capitalised (not "the developer of the app", "an engineer of sorts").
        let field = |j: usize| {
            toks.get(j).is_some_and(|t| {
                t.cap && t.text.chars().all(char::is_alphabetic) && !is_word(t, STOP) && !is_word(t, POSSESSIVE) && !is_word(t, SKIP)
            })
        };
        let mut end = i + 1;
        if toks.get(end).is_some_and(|t| t.lower == "of") && field(end + 1) {
            end += 2;
            if toks[end - 1].cap && toks.get(end).is_some_and(|t| t.cap) && field(end) {
                end += 1;
            }
        }
        out.push((start, end));
    }
    out
}

/// The values of `def` in the clause: typed values from the gazetteer, else job titles,
/// else the name or phrase after the cue.
fn values(toks: &[Tok], k: usize, def: &SlotDef, anchor: Option<usize>) -> Vec<(usize, usize, String)> {
    if def.id == "diet"
        && let Some(v) = diet(toks)
    {
        return vec![(0, 0, v)];
    }
    let hits = gazetteer_hits(toks, k);
    if !hits.is_empty() && def.kind == SlotKind::Multi && def.shape == Shape::Phrase && anchor.is_some() {
        // "My hobbies are woodworking, fermentation and trail running": the list after
        // the cue, known or not.
        let mut out: Vec<(usize, usize, String)> = hits.iter().map(|(a, b, text, _)| (*a, *b, text.clone())).collect();
        let mut at = anchor.unwrap_or(0);
        while let Some(r) = value_after(toks, at, def) {
            if !out.iter().any(|(a, b, _)| r.0 < *b && *a < r.1) {
                out.push((r.0, r.1, span(toks, r)));
            }
            if !toks.get(r.1).is_some_and(|t| is_word(t, LIST_JOINERS)) {
                break;
            }
            at = r.1 + 1;
        }
        out.sort();
        return out;
    }
    if !hits.is_empty() {
        return hits
            .into_iter()
            .map(|(a, b, text, canonical)| {
                let v = if def.shape == Shape::Phrase && def.id == "diet" { canonical } else { text };
                (a, b, v)
            })
            .collect();
    }
    if def.id == "job_title" {
        return job_titles(toks).into_iter().map(|r| (r.0, r.1, span(toks, r))).collect();
    }
    let Some(from) = anchor else {
        // A carried slot: any name in the clause (not the speaker's words).
        if def.shape == Shape::Name {
            let mut i = 0;
            while i < toks.len() {
                if toks[i].cap && !is_word(&toks[i], NOT_NAMES) {
                    return value_after(toks, i, def).map(|r| (r.0, r.1, span(toks, r))).into_iter().collect();
                }
                i += 1;
            }
            return Vec::new();
        }
        return value_after(toks, 0, def).map(|r| (r.0, r.1, span(toks, r))).into_iter().collect();
    };
    let mut out = Vec::new();
    // "I left Umbrella Corp and now work at …", "I'm no longer at Initech": the old value
    // right after the negation.
    if def.shape == Shape::Name
        && let Some(n) = negated_at(toks)
        && n < from
        && let Some(r) = value_after(toks, n + 1, def).filter(|r| r.1 <= from)
    {
        out.push((r.0, r.1, span(toks, r)));
    }
    // "… Domino, after losing Ziggy": a name right after a negation, after the value.
    if def.shape == Shape::Name
        && let Some(n) = toks
            .iter()
            .enumerate()
            .skip(from)
            .position(|(_, t)| is_word(t, &["losing", "lost", "left", "quit", "without", "after"]))
            .map(|p| p + from)
        && let Some(r) = value_after(toks, n + 1, def).filter(|r| r.0 <= n + 2)
    {
        out.push((r.0, r.1, span(toks, r)));
    }
    let mut at = from;
    while let Some(r) = value_after(toks, at, def) {
        out.push((r.0, r.1, span(toks, r)));
        // A list ("climbing, pottery and chess") for multi-valued slots; for names, the
        // next name after a word that marks a change ("to Mireille", "statt an Sabine").
        let next_name = def.shape == Shape::Name
            && def.kind == SlotKind::Single
            && (r.1 + 1..toks.len().min(r.1 + 4)).any(|i| {
                toks[i].cap && is_word(&toks[i - 1], &["to", "for", "statt", "instead", "nicht", "an", "auf", "nach", "zu", "than", "als"])
            });
        if next_name {
            at = r.1;
            while at < toks.len() && !(toks[at].cap && at > r.1 && !is_word(&toks[at], NOT_NAMES)) {
                at += 1;
            }
            if value_after(toks, at, def).is_some_and(|n| n.0 == at) {
                continue;
            }
            break;
        }
        if def.kind != SlotKind::Multi || !toks.get(r.1).is_some_and(|t| is_word(t, LIST_JOINERS)) {
            break;
        }
        at = r.1 + 1;
        while at < toks.len() && is_word(&toks[at], LIST_JOINERS) {
            at += 1;
        }
    }
    if out.iter().all(|(_, b, _)| *b <= from) && def.shape == Shape::Name {
        // "adopted a puppy, Mango": the first name after the cue.
        if let Some(i) = (from..toks.len()).find(|&i| toks[i].cap && !is_word(&toks[i], NOT_NAMES))
            && let Some(r) = value_after(toks, i, def)
        {
            out.push((r.0, r.1, span(toks, r)));
        }
    }
    if out.is_empty() && def.shape == Shape::Name {
        // "{Name} is no longer my manager": the name before the cue.
        let before: Vec<usize> = (0..from.min(toks.len())).filter(|&i| toks[i].cap && !is_word(&toks[i], NOT_NAMES)).collect();
        let mine = |_: usize| toks.iter().any(|t| is_word(t, POSSESSIVE) || is_word(t, FIRST_PERSON));
        if let Some(&i) = before.first().filter(|&&i| mine(i))
            && let Some(r) = value_after(toks, i, def)
        {
            out.push((r.0, r.1, span(toks, r)));
        }
    }
    out
}

/// Diets stated without the diet's name: "I don't eat meat" (vegetarian), "I eat
/// everything" / "eating meat again" (omnivore), "plant-based" (vegan).
fn diet(toks: &[Tok]) -> Option<String> {
    let has = |w: &str| toks.iter().position(|t| t.lower == w);
    let meat = has("meat").or(has("fleisch"));
    let not = toks.iter().position(|t| is_word(t, &["not", "no", "kein", "keine", "nicht", "without", "cut"]));
    if let Some(m) = meat {
        if toks.iter().any(|t| is_word(t, &["again", "wieder"])) {
            return Some("omnivore".into());
        }
        if not.is_some_and(|n| n < m) {
            return Some("vegetarian".into());
        }
    }
    if toks.iter().any(|t| t.stem == "eat" || t.lower == "esse") && toks.iter().any(|t| is_word(t, &["everything", "anything", "alles"])) {
        return Some("omnivore".into());
    }
    None
}

/// A clause that is only "NOT Y", Y one or two words that name something ("NOT shakshuka."),
/// not "Not a big deal." (the words are read only when the clause opens with "not").
fn short_not(clause: &str) -> bool {
    if !clause.get(..4).is_some_and(|h| h.eq_ignore_ascii_case("not ")) {
        return false;
    }
    let named: Vec<String> =
        clause.split_whitespace().skip(1).map(|w| w.trim_matches(|ch: char| !ch.is_alphanumeric()).to_lowercase()).collect();
    (1..=2).contains(&named.len())
        && !named.iter().any(|w| {
            ["a", "an", "the", "at", "all", "really", "sure", "that", "this", "so", "too", "yet", "now", "bad"].contains(&w.as_str())
        })
}

/// Where `needle` (ASCII) first occurs in `hay`, ignoring ASCII case: an offset into
/// `hay` itself (lower-casing a copy can change byte offsets: "İ", the Kelvin sign).
fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    hay.char_indices().map(|(i, _)| i).find(|&i| hay.get(i..i + needle.len()).is_some_and(|s| s.eq_ignore_ascii_case(needle)))
}

/// Bare corrections: "actually it's X, not Y", "X, not Y", "not Y, X", "X, nicht Y",
/// "nicht Y, sondern X".
fn correction(text: &str) -> Option<(String, String)> {
    let t = text.trim().trim_end_matches(['.', '!']);
    let clean = |s: &str| {
        // "*Beckett, not Zoltan": the star marks a chat correction, not the name.
        let mut s = s.trim().trim_matches(|c: char| c == '"' || c == ',' || c == '*');
        // Leading interjections: "sorry, I meant …", "oops, it's …", "correction — …".
        loop {
            let before = s.len();
            for p in [
                "actually it's ",
                "actually it is ",
                "actually, it's ",
                "actually, ",
                "actually ",
                "it's ",
                "it is ",
                "es ist ",
                "eigentlich ",
                "sorry, ",
                "sorry ",
                "oops, ",
                "oops ",
                "i meant ",
                "i mean ",
                "correction: ",
                "correction ",
                "korrektur: ",
                "no, ",
                "wait, ",
                "my bad, ",
                "ich meinte ",
                "sorry, ich meinte ",
                "pardon, ",
            ] {
                if s.get(..p.len()).is_some_and(|head| head.eq_ignore_ascii_case(p)) {
                    s = s[p.len()..].trim_start();
                    break;
                }
            }
            if s.len() == before {
                break;
            }
        }
        s.trim().to_string()
    };
    // Where the clause that ends `s` starts: past its last break.
    let clause_start =
        |s: &str| ["--", "—", "–", ":", ";", ". ", "! ", "? "].iter().filter_map(|b| s.rfind(b).map(|i| i + b.len())).max().unwrap_or(0);
    let trivial = |x: &str| {
        let x = x.to_lowercase();
        x.len() < 2
            || [
                "hmm",
                "um",
                "uh",
                "sure",
                "really",
                "quite",
                "so",
                "yet",
                "now",
                "that",
                "this",
                "me",
                "ok",
                "okay",
                "yes",
                "no",
                "thanks",
                "thank you",
                "you",
            ]
            .contains(&x.as_str())
    };
    let short = |x: &str| !x.is_empty() && x.split_whitespace().count() <= 4 && !trivial(x);
    // "X, not Y" in any case, anywhere in the clause: X is what follows the last break
    // before it ("wait no, scratch that -- X, not Y"), Y runs to the next break or to
    // what is not a word ("…, not Y 🤦"). German: "Korrektur: QuestDB, nicht Greenplum"
    // (but not "nicht Y, sondern X", below).
    let not = [", not ", ", nicht "].into_iter().find_map(|n| find_ci(t, n).map(|at| (at, n.len())));
    if let Some((at, len)) = not.filter(|_| find_ci(t, ", sondern ").is_none()) {
        let before = &t[..at];
        let start = clause_start(before);
        let after = &t[at + len..];
        let end = after.find(|c: char| !(c.is_alphanumeric() || c.is_whitespace() || "'’&+#.-".contains(c))).unwrap_or(after.len());
        let (new, old) = (clean(&before[start..]), clean(after[..end].trim_end_matches(['.', ' '])));
        return (short(&new) && short(&old)).then_some((new, old));
    }
    // "Small correction to earlier: not Cheddar, Biscotti", "not Y but X": a clause that
    // opens with "not" sets the old value against the new one after it.
    let clause = t[clause_start(t)..].trim_start();
    if let Some(rest) = clause.get(..4).filter(|h| h.eq_ignore_ascii_case("not ")).and_then(|_| clause.get(4..))
        && let Some((old, new)) = rest.split_once(", ").or_else(|| rest.split_once(" but "))
    {
        let new = new.strip_prefix("but ").unwrap_or(new);
        let (new, old) = (clean(new), clean(old));
        return (short(&new) && short(&old)).then_some((new, old));
    }
    if let Some(at) = find_ci(t, "i meant ").map(|at| at + "i meant ".len())
        && let Some(when) = find_ci(&t[at..], "when i said ").map(|w| w + at)
    {
        let (new, old) = (clean(&t[at..when]), clean(&t[when + "when i said ".len()..]));
        return (!new.is_empty() && !old.is_empty()).then_some((new, old));
    }
    if let Some(w) = [" was wrong, it's ", " was wrong, it is ", " is wrong, it's ", " is wrong, it is "].iter().find_map(|p| find_ci(t, p))
    {
        let head = &t[..w];
        let old = head.rsplit(',').next().unwrap_or(head);
        let tail = &t[w..];
        let new = tail.split_once("it's ").or_else(|| tail.split_once("it is ")).map(|(_, n)| n).unwrap_or("");
        let (new, old) = (clean(new), clean(old));
        return (!new.is_empty() && !old.is_empty() && old.split_whitespace().count() <= 4).then_some((new, old));
    }
    if let Some(rest) = t.strip_prefix("nicht ").or_else(|| t.strip_prefix("Nicht "))
        && let Some((old, new)) = rest.split_once(", sondern ")
    {
        return Some((clean(new), clean(old)));
    }
    None
}

fn claims(clauses: &[Clause], lang: Lang) -> Vec<Claim> {
    // Pass 1: each clause's best slots. Is the utterance in the first person at all?
    // ("Migrated off X onto Y" drops its "I": a clause that starts with a verb counts.)
    let speaker_speaks = clauses.iter().any(|x| {
        x.toks.iter().any(|t| is_word(t, FIRST_PERSON) || is_word(t, POSSESSIVE))
            || x.toks.first().is_some_and(|t| t.cap && looks_like_a_verb(t))
    });
    let mut found: Vec<Vec<(usize, f64, Option<usize>)>> = Vec::new();
    for c in clauses {
        let mut slots: Vec<(usize, f64, Option<usize>)> = (0..SLOTS.len())
            .map(|k| (k, score(&c.toks, lang, k, speaker_speaks)))
            .filter(|(_, (s, _))| *s >= 2.0)
            .map(|(k, (s, a))| (k, s, a))
            .collect();
        slots.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found.push(slots);
    }
    let mut out = Vec::new();
    for (ci, c) in clauses.iter().enumerate() {
        // "Correction: X. NOT Y." over two clauses reads as "X, not Y".
        let joined = (ci > 0 && short_not(&c.text)).then(|| format!("{}, {}", clauses[ci - 1].text.trim_end_matches(['.', '!']), c.text));
        if let Some((new, old)) = correction(joined.as_deref().unwrap_or(&c.text)) {
            // "my manager is Aurelio, not Aurelia": the new part states the slot itself.
            let words = new.split_whitespace().count();
            let stated = if words > 1 { extract(&new).into_iter().find(|x| x.op == Op::Set) } else { None };
            let (slot, value) = match stated {
                Some(x) => (x.slot, x.value),
                // "I don't like Python, not at all": words that state no value are no correction.
                None if words > 2 => continue,
                None => {
                    // The slot of the new value's own words ("I code in Python: Django, not
                    // Flask" is no change of language), else whichever fact holds the old one.
                    let toks = tokenize(&new, &stemmer(lang));
                    let k = (0..SLOTS.len()).find(|&k| !GAZETTEERS[k].is_empty() && !gazetteer_hits(&toks, k).is_empty());
                    (k.map(|k| SLOTS[k].id), new)
                }
            };
            out.push(Claim { other: None, slot, value, op: Op::Set, old: Some(old), clause: c.text.clone() });
            continue;
        }
        let mut slots = found[ci].clone();
        let carried = slots.is_empty();
        // A clause about something of its own ("my skip-level is Dana") takes no slot from
        // its neighbour.
        if carried && c.toks.iter().any(|t| is_word(t, POSSESSIVE)) {
            continue;
        }
        if carried {
            // A neighbour's slot: the previous clause's, else the next one's. A fragment of a
            // word or two that opens the message ("Fyi: …", "Random but …", "Correction:
            // …", "New obsession: …") is a label, not a value of what follows.
            let label = ci == 0 && c.toks.iter().filter(|t| t.text != ",").count() <= 2;
            let later = if label { 0..0 } else { ci + 1..clauses.len() };
            let near = (0..ci).rev().chain(later).find_map(|j| found[j].first().copied());
            match near {
                Some((k, s, _)) => slots.push((k, s, None)),
                None => continue,
            }
        }
        let mut used: Vec<(usize, usize)> = Vec::new();
        for (k, _, anchor) in slots {
            let def = &SLOTS[k];
            let other = match subject(&c.toks, def) {
                Ok(o) => o,
                // No subject in the clause ("…, so plant-based all the way now"): the
                // speaker's, when the utterance is in the first person.
                Err(()) if carried || def.project || speaker_speaks || !starts_impersonal(&c.toks) => None,
                Err(()) => continue,
            };
            // A carried clause does not restate a value this utterance already set
            // ("I'm doing keto, so low carb for me").
            if carried
                && negated(&c.toks, lang).is_none()
                && out.iter().any(|o: &Claim| o.slot == Some(def.id) && o.other.is_none() && matches!(o.op, Op::Set))
            {
                continue;
            }
            // "…; Azure was cheaper": a carried clause that starts with one of the slot's
            // typed values is about that value.
            let typed_subject = other.as_deref().is_some_and(|o| gazetteer_hits(&c.toks, k).iter().any(|h| h.2 == o));
            if carried && other.is_some() && !typed_subject {
                // "sadly Biscuit passed away": a carried clause is about the slot's values;
                // so is a bare name ("I have a new boss: Bogdan").
                let bare = c.toks.iter().all(|t| t.cap || t.text == "," || is_word(t, &["and", "und", "&"]));
                if negated(&c.toks, lang).is_none() && !bare {
                    continue;
                }
            }
            let other = if carried { None } else { other };
            if other.as_deref().is_some_and(|o| INDEFINITE.contains(&o)) {
                continue;
            }
            // "My partner works at X": the partner is the subject, not the partner slot's value.
            if other.as_deref().and_then(|o| o.split_whitespace().last()).is_some_and(|w| def.nouns.contains(&w)) {
                continue;
            }
            let vals: Vec<(usize, usize, String)> = values(&c.toks, k, def, anchor)
                .into_iter()
                .filter(|(a, b, _)| a == b || !used.iter().any(|(x, y)| a < y && x < b))
                .filter(|(_, _, v)| !v.is_empty() && !is_pronoun(v))
                // "Allergic to mustard & latex, fyi", "… too now. great.": chat, not a value.
                .filter(|&(a, b, _)| a == b || !c.toks[a..b].iter().all(|t| is_word(t, CASUAL) || is_word(t, COURTESY)))
                .filter(|&(_, b, _)| !verb_with_object(&c.toks, b, k))
                .collect();
            // A value is not its own subject ("Postgres runs on port 5432").
            let vals: Vec<(usize, usize, String)> = vals.into_iter().filter(|(_, _, v)| other.as_deref() != Some(v.as_str())).collect();
            if vals.is_empty() {
                continue;
            }
            for (a, b, _) in &vals {
                if a != b {
                    used.push((*a, *b));
                }
            }
            let neg = if def.id == "diet" && diet(&c.toks).is_some() { None } else { negated(&c.toks, lang) };
            for claim in ops(c, def, &vals, neg, other) {
                // "I'm no longer at Acme; I joined Globex": one change, Acme → Globex.
                if claim.op == Op::Set
                    && let Some(i) = out
                        .iter()
                        .position(|o| o.slot == claim.slot && o.other == claim.other && o.op == Op::Negate && o.value != claim.value)
                {
                    let negated = out.remove(i);
                    out.push(Claim { old: claim.old.clone().or(Some(negated.value)), ..claim });
                    continue;
                }
                let seen = out.iter().any(|o| o.slot == claim.slot && o.other == claim.other && o.op == claim.op && o.value == claim.value);
                if !seen {
                    out.push(claim);
                }
            }
        }
    }
    out
}

/// Whether the value ending at `end` is a verb whose object is a known value of another
/// slot ("We've been running on DynamoDB", "been coding in Rust"): the clause states
/// that slot, not a hobby.
fn verb_with_object(toks: &[Tok], end: usize, k: usize) -> bool {
    end > 0
        && toks[end - 1].lower.ends_with("ing")
        && toks.get(end).is_some_and(|t| is_word(t, &["on", "in", "with"]))
        && (0..SLOTS.len()).filter(|&j| j != k).any(|j| gazetteer_hits(&toks[end + 1..], j).first().is_some_and(|h| h.0 == 0))
}

/// A capitalised word at the start of a clause that is a verb, not a name: "Got hired",
/// "Been living", "Working as", "Migrated off".
fn looks_like_a_verb(t: &Tok) -> bool {
    const VERBS: &[&str] = &[
        "got", "been", "had", "have", "has", "did", "was", "were", "went", "gave", "took", "made", "became", "quit", "left", "joined",
        "moved", "started", "finally", "just", "still", "no", "not", "never", "bin", "habe", "hatte", "wurde", "bin", "war", "gehe",
        "spreche", "wohne", "arbeite", "esse", "spiele",
    ];
    is_word(t, VERBS) || ((t.lower.ends_with("ing") || t.lower.ends_with("ed")) && t.stem != t.lower && t.lower.len() > 4)
}

/// A clause that starts with an article or "it"/"there" ("The trams in Graz were packed")
/// is about something; one that starts with a verb ("Got promoted to staff engineer",
/// "Been living in Aarhus") drops its "I".
fn starts_impersonal(toks: &[Tok]) -> bool {
    toks.iter().find(|t| !is_word(t, &["oh", "so", "and", "but", "well", "also", "btw", "just", "finally", "und"])).is_none_or(|t| {
        (t.cap && !t.lowered && !is_lexicon_word(t) && !looks_like_a_verb(t))
            || is_word(
                t,
                &[
                    "the", "a", "an", "this", "that", "these", "those", "it", "there", "das", "die", "der", "ein", "eine", "es", "someone",
                    "somebody",
                ],
            )
    })
}

fn is_pronoun(v: &str) -> bool {
    ["i", "me", "it", "we", "you", "he", "she", "they", "ich", "wir", "es"].contains(&v.to_lowercase().as_str())
}

/// Claims from one clause's values of one slot: which value is the old one ("from X to
/// Y", "left X and now work at Y", "X has overtaken Y"), and whether the clause negates.
fn ops(c: &Clause, def: &SlotDef, vals: &[(usize, usize, String)], neg: Option<usize>, other: Option<String>) -> Vec<Claim> {
    let claim = |value: &str, op: Op, old: Option<String>| Claim {
        other: other.clone(),
        slot: Some(def.id),
        value: value.to_string(),
        op,
        old,
        clause: c.text.clone(),
    };
    let toks = &c.toks;
    let before = |a: usize, words: &[&str]| (a >= 1 && is_word(&toks[a - 1], words)) || (a >= 2 && is_word(&toks[a - 2], words));
    const OLD_MARKS: &[&str] = &[
        "from",
        "off",
        "von",
        "left",
        "on",
        "up",
        "not",
        "over",
        "overtaken",
        "replaced",
        "instead",
        "quit",
        "ditched",
        "dropped",
        "statt",
        "anstatt",
        "nicht",
        "than",
    ];
    let is_old = |a: usize, b: usize| {
        a != b
            && (before(a, OLD_MARKS)
                || neg
                    .is_some_and(|n| n < a && !toks[n..a].iter().any(|t| is_word(t, &["now", "jetzt", "and", "but", "so", "und", "aber"]))))
    };
    if vals.len() >= 2 && def.kind == SlotKind::Single {
        let old = vals.iter().find(|(a, b, _)| is_old(*a, *b)).or_else(|| {
            // "X has overtaken Y": the second is the old one.
            toks.iter().any(|t| is_word(t, &["overtaken", "replaced", "beaten", "over"])).then(|| &vals[1])
        });
        // Without a word that marks the old value, two values are a change only beside a
        // verb of change ("we switched MySQL for Postgres"); else the first is the value
        // ("I live in Munich with Jonas").
        let changing = toks
            .iter()
            .any(|t| is_word(t, &["switched", "switch", "moved", "migrated", "changed", "swapped", "umgestiegen", "gewechselt"]));
        let old = old.or(if changing { vals.first() } else { None }).map(|v| v.2.clone());
        if old.is_none() {
            return vec![claim(&vals[0].2, if neg.is_some_and(|n| n < vals[0].0) { Op::Negate } else { Op::Set }, None)];
        }
        let new = vals.iter().rev().find(|v| Some(&v.2) != old.as_ref()).map(|v| v.2.clone());
        return match new {
            Some(new) => vec![claim(&new, Op::Set, old)],
            None => Vec::new(),
        };
    }
    vals.iter()
        .map(|(a, b, v)| {
            // Negated: the value follows the negation ("I don't live in X anymore"), or is
            // the one value and comes before it ("Rocket passed away", "X is no longer my
            // manager").
            let negative = neg.is_some() && (is_old(*a, *b) || *a == *b || (vals.len() == 1 && neg.is_some_and(|n| n >= *b)));
            match (def.kind, negative) {
                (SlotKind::Single, false) => claim(v, Op::Set, None),
                (SlotKind::Single, true) => claim(v, Op::Negate, None),
                (SlotKind::Multi, false) => claim(v, Op::Add, None),
                (SlotKind::Multi, true) => claim(v, Op::Remove, None),
            }
        })
        .collect()
}

/// The slots a question asks about, best first (empty when it names none).
pub fn question_slots(question: &str) -> Vec<&'static str> {
    let lang = language(question);
    let stem = stemmer(lang);
    let toks = tokenize(question, &stem);
    let compiled = match lang {
        Lang::En => &lexicon(Lang::En).slots,
        Lang::De => &lexicon(Lang::De).slots,
    };
    let mut scored: Vec<(usize, f64)> = SLOTS
        .iter()
        .enumerate()
        .map(|(k, _)| {
            let c = &compiled[k];
            let mut s = c.question.iter().filter(|q| find_phrase(&toks, q).is_some()).map(|q| q.len() as f64).sum::<f64>();
            if c.nouns.iter().any(|n| find_phrase(&toks, n).is_some()) {
                s += 1.0;
            }
            if !GAZETTEERS[k].is_empty() && !gazetteer_hits(&toks, k).is_empty() {
                s += 0.5;
            }
            (k, s)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let best = scored.first().map_or(0.0, |b| b.1);
    scored.into_iter().filter(|(_, s)| *s >= best).map(|(k, _)| SLOTS[k].id).collect()
}
