//! What the heartbeat learns without a model (issue 36): lessons read from the structure
//! of the last week's events, each with its evidence, each becoming one playbook line.
//!
//! - **Fix**: a tool action that failed with the same normalised error on two or more
//!   occasions, where after a failure the agent ran other steps and the same action then
//!   succeeded (within [`FIX_WINDOW_MINS`] minutes). The steps are the fix. The line: "When
//!   `npm test` fails with “…”, first run `docker compose up -d db` (it fixed this N×, …)".
//!   A plain retry that worked is not a fix.
//! - **Correction**: a user message that corrects what the agent just did (within
//!   [`CORRECTION_WINDOW_MINS`] minutes of the agent's tool call or message): it opens
//!   with a refusal or a correction ("no", "don't", "stop", "actually", "wrong", "instead",
//!   "I said", …) and does not ask (`asks`). It counts when it recurs (the same action
//!   corrected, or the same words) or when it is worded as a standing rule ("always",
//!   "never", "from now on").
//! - **Repeated question**: a question the user asked on two or more days (the same
//!   content words, Jaccard ≥ [`SAME_WORDS`]): the answer belongs where the session start
//!   shows it.
//!
//! Each lesson has a `head`, the start of its line, which names the trigger and stays the
//! same while the evidence grows: the curator finds the line by it and updates it instead
//! of adding a second one, and the analyzer delivers one tip per head (one a tick), so
//! each lesson is an output the feedback loop can score. Lessons never hold facts about people (those are the memory's); the words
//! they quote are the user's corrections and questions, cut to [`QUOTE_CHARS`].
//!
//! The observed-feedback part ([`observe`]) scores a delivered tip from what happened
//! after it: the failure, correction or question came back (−0.5); the action ran again
//! without the error (+0.6); a correction or question stayed away for [`QUIET_DAYS`] days
//! of the user's messages, the corrected action not run again (+0.4). Without evidence a
//! tip stays unscored.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use mneme_truth::topics::TopicModel;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::setup::{Event, History};

/// Days of events lessons are read from.
pub const LESSON_DAYS: i64 = 7;
/// Most events read for lessons.
pub const LESSON_EVENTS: usize = 1000;
/// A fix is what ran between a failure and the same action's success within this window.
pub const FIX_WINDOW_MINS: i64 = 60;
/// Most steps a fix has.
pub const MAX_FIX_STEPS: usize = 3;
/// A correction answers the agent's last step within this window.
pub const CORRECTION_WINDOW_MINS: i64 = 15;
/// Two texts say the same when their content words overlap this much (Jaccard)...
pub const SAME_WORDS: f64 = 0.6;
/// ...or, with the embedding model, when their vectors are this close (cosine).
pub const SAME_MEANING: f32 = 0.7;
/// Most messages embedded per tick for grouping.
pub const MAX_EMBEDDED: usize = 200;
/// How a repeated question's line opens (its quote follows).
const QUESTION_OPENING: &str = "The user keeps asking “";
/// How the line of a correction of a message opens (its quote follows).
const CORRECTION_OPENING: &str = "The user corrected the agent: “";
/// Days with the user's messages after a correction's or question's tip before its
/// absence counts as the tip working.
pub const QUIET_DAYS: usize = 3;
/// Content words a correction of a message (not of a tool call) needs to be a rule.
pub const MIN_RULE_WORDS: usize = 4;
/// Characters of the user's words a line quotes.
pub const QUOTE_CHARS: usize = 120;
/// Characters of an error a fix's line quotes (the playbook's session-start budget is
/// 4,000 bytes).
pub const MODE_CHARS: usize = 60;

/// What kind of lesson.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonKind {
    Fix,
    Correction,
    Question,
}

/// One lesson and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lesson {
    pub kind: LessonKind,
    /// The start of the line: names the trigger, stable while the evidence grows.
    pub head: String,
    /// The whole playbook line (without the bullet).
    pub line: String,
    /// How often the trigger was seen in the window.
    pub count: usize,
    /// When it was last seen.
    pub last: Timestamp,
    /// The action it is about (fix and correction lessons): the failing or corrected one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The normalised error (fix lessons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The steps that fixed it (fix lessons), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fix: Vec<String>,
    /// The words that recur (correction and question lessons), normalised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
    /// The first wording (correction and question lessons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Every wording the group holds (by meaning with the model), the first first.
    #[serde(skip)]
    pub members: Vec<String>,
    /// Playbook lines and delivered heads known to be this lesson (`recognise`).
    #[serde(skip)]
    pub aliases: Vec<String>,
}

/// The user's words a question's or a message correction's line (or head) quotes.
pub fn quoted(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(QUESTION_OPENING).or_else(|| text.strip_prefix(CORRECTION_OPENING))?;
    rest.split_once('”').map(|(q, _)| q.trim_end_matches('…'))
}

/// Marks the `known` texts (playbook lines, delivered heads) that quote what a lesson's
/// group says, by meaning when `meanings` has their vectors: a group re-formed as the
/// week moved on may open with another wording and is still the same lesson.
pub fn recognise(lessons: &mut [Lesson], known: &[String], meanings: &Meanings) {
    for lesson in lessons.iter_mut().filter(|l| l.quotes()) {
        for k in known {
            if quoted(k).is_some_and(|q| lesson.members.iter().any(|m| meanings.same(q, m))) && !lesson.aliases.contains(k) {
                lesson.aliases.push(k.clone());
            }
        }
    }
}

impl Lesson {
    /// The playbook section the line goes under.
    pub fn section(&self) -> &'static str {
        match self.kind {
            LessonKind::Fix => "Error prevention",
            LessonKind::Correction => "Corrections from the user",
            LessonKind::Question => "Repeated questions",
        }
    }

    /// Whether `text` (a playbook line's text, or a head) is this lesson's line: it starts
    /// with the head, or, for a question or a correction of a message, it quotes words
    /// that say the same (a group re-formed as the week moved on opens with another
    /// wording, and is still the same lesson).
    pub fn is_line(&self, text: &str) -> bool {
        use mneme_workspace::playbook::normalize;
        let head = normalize(&self.head);
        if (!head.is_empty() && normalize(text).starts_with(&head)) || self.aliases.iter().any(|a| a == text) {
            return true;
        }
        if !self.quotes() {
            return false;
        }
        let Some(q) = quoted(text) else { return false };
        let words = content_words(q);
        self.members.iter().any(|m| quote(m).trim_end_matches('…') == q || jaccard(&words, &content_words(m)) >= SAME_WORDS)
    }

    /// Whether its line quotes the user (a question, or a correction of a message).
    fn quotes(&self) -> bool {
        matches!((self.kind, &self.action), (LessonKind::Question, _) | (LessonKind::Correction, None))
    }
}

const STOP: [&str; 24] = [
    "the", "and", "for", "you", "your", "this", "that", "with", "what", "was", "are", "is", "it", "of", "to", "a", "an", "in", "on", "me",
    "my", "do", "does", "again",
];

/// The content words of `text`, lower-cased.
pub fn content_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| w.len() > 1 && !STOP.contains(&w.as_str()))
        .collect()
}

/// The share of words two sets have in common (0 for two empty sets).
pub fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 0.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

fn cut(text: &str, chars: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= chars { one } else { format!("{}…", one.chars().take(chars - 1).collect::<String>()) }
}

fn quote(text: &str) -> String {
    cut(text, QUOTE_CHARS)
}

fn day(at: Timestamp) -> String {
    at.strftime("%Y-%m-%d").to_string()
}

/// The correction layer's class for a reply that corrects the agent (the other is
/// `none`).
pub const CORRECTION: &str = "correction";
/// Probability from which the layer calls a reply a correction.
pub const CORRECTION_MIN_P: f32 = 0.5;
/// ...and a reply that asks: most questions ask for something ("how do I open a db shell
/// on prod?"); a question corrects only when the layer is sure ("why did you delete the
/// fixtures?"). Chosen on a validation split of the training files.
pub const CORRECTION_QUESTION_MIN_P: f32 = 0.7;

/// A two-class layer over the local encoder: does a reply correct what the agent just
/// did? Trained by `mneme-bench corrections train` on
/// `bench/reflect/train/*.jsonl` (replies three helpers wrote without seeing this code);
/// measured on the held-out `bench/reflect/corrections.jsonl` and
/// `corrections_terse_heldout.jsonl`.
#[derive(Debug)]
pub struct CorrectionLayer(TopicModel);

static LAYER: OnceLock<Option<CorrectionLayer>> = OnceLock::new();

impl CorrectionLayer {
    /// The compiled-in layer, if it was trained on the encoder `model`.
    pub fn builtin(model: &str) -> Option<&'static CorrectionLayer> {
        LAYER
            .get_or_init(|| serde_json::from_str::<TopicModel>(include_str!("../data/corrections.json")).ok().map(CorrectionLayer))
            .as_ref()
            .filter(|l| l.0.model == model && l.0.classes.first().is_some_and(|c| c == CORRECTION))
    }

    /// The probability that the reply with unit vector `v` is a correction (0 for a
    /// vector of another dimension).
    pub fn probability(&self, v: &[f32]) -> f32 {
        self.0.probabilities(v).first().copied().unwrap_or(0.0)
    }

    /// Whether the reply `text` with unit vector `v` corrects the agent:
    /// [`CORRECTION_MIN_P`], or [`CORRECTION_QUESTION_MIN_P`] for a reply that [`asks`].
    pub fn corrects(&self, text: &str, v: &[f32]) -> bool {
        corrects_at(self.probability(v), text, CORRECTION_MIN_P, CORRECTION_QUESTION_MIN_P)
    }
}

/// The layer's decision at probability `p` with the two thresholds (`mneme-bench
/// corrections eval` varies them).
pub fn corrects_at(p: f32, text: &str, min_p: f32, question_min_p: f32) -> bool {
    p >= if asks(text) { question_min_p } else { min_p }
}

/// The vectors of the user's questions and replies, from the attached model, so
/// paraphrases group ("what's the staging URL?", "where is staging hosted?") and the
/// correction layer reads the replies; empty without a model, and then content words and
/// the word rule decide.
#[derive(Debug, Default)]
pub struct Meanings {
    vectors: HashMap<String, Vec<f32>>,
    layer: Option<&'static CorrectionLayer>,
}

impl Meanings {
    /// Embeds the user's questions and replies to the agent's steps in `history` (at most
    /// [`MAX_EMBEDDED`], the newest) with `embed`; empty when it gives nothing.
    /// `known`: playbook lines and delivered heads, whose quotes are embedded too.
    /// `model`: the encoder's id, which picks the correction layer.
    pub fn of(history: &History, known: &[String], model: Option<&str>, embed: impl Fn(&[&str]) -> Option<Vec<Vec<f32>>>) -> Meanings {
        let events = &history.events;
        let mut texts: Vec<&str> = user_messages(events)
            .filter(|(i, t, _)| asks(t) || is_correction(t) || answered(events, *i).is_ok())
            .map(|(_, t, _)| t)
            .collect();
        texts.reverse();
        texts.truncate(MAX_EMBEDDED);
        texts.extend(known.iter().filter_map(|k| quoted(k)));
        let mut seen = std::collections::HashSet::new();
        texts.retain(|t| seen.insert(*t));
        match embed(&texts) {
            Some(vectors) if vectors.len() == texts.len() => Meanings {
                vectors: texts.into_iter().map(str::to_string).zip(vectors).collect(),
                layer: model.and_then(CorrectionLayer::builtin),
            },
            _ => Meanings::default(),
        }
    }

    /// Whether the model is behind these meanings.
    pub fn by_model(&self) -> bool {
        !self.vectors.is_empty()
    }

    /// Whether the correction layer reads the replies (else the word rule does).
    pub fn by_layer(&self) -> bool {
        self.layer.is_some() && self.by_model()
    }

    /// Whether the user's `text` corrects the agent: the layer's reading when it and the
    /// text's vector are there, else [`is_correction`].
    pub fn corrects(&self, text: &str) -> bool {
        match (self.layer, self.vectors.get(text)) {
            (Some(layer), Some(v)) => layer.corrects(text, v),
            _ => is_correction(text),
        }
    }

    /// Whether `a` and `b` say the same: by their vectors when both have one, else by
    /// their content words.
    pub fn same(&self, a: &str, b: &str) -> bool {
        match (self.vectors.get(a), self.vectors.get(b)) {
            (Some(x), Some(y)) => x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>() >= SAME_MEANING,
            _ => jaccard(&content_words(a), &content_words(b)) >= SAME_WORDS,
        }
    }
}

/// The openings that make a user's reply a correction of the agent's last step.
const CORRECTION_OPENINGS: [&str; 14] = [
    "no",
    "nope",
    "don't",
    "dont",
    "do not",
    "stop",
    "wrong",
    "not",
    "never",
    "actually",
    "instead",
    "i said",
    "i told you",
    "please don't",
];
/// Words that make a correction a standing rule, counted from its first occurrence.
const STANDING: [&str; 5] = ["always", "never", "from now on", "every time", "in future"];

/// Whether `text` (a user's message) corrects the agent: it opens with a refusal or a
/// correction, or says "instead" / "not … but", and does not ask.
pub fn is_correction(text: &str) -> bool {
    let lower = text.trim().to_lowercase().replace('’', "'");
    if lower.is_empty() || asks(text) {
        return false;
    }
    let opens = CORRECTION_OPENINGS
        .iter()
        .any(|o| lower.strip_prefix(o).is_some_and(|rest| rest.chars().next().is_none_or(|c| !c.is_alphanumeric() && c != '\'')));
    opens || lower.contains(" instead") || lower.contains("i told you") || lower.contains("i said ")
}

const INTERROGATIVES: [&str; 18] = [
    "what", "what's", "whats", "where", "when", "who", "why", "how", "which", "is", "are", "can", "could", "do", "does", "did", "should",
    "will",
];

/// Whether `text` asks a question (a request, which the truth extractor also keeps out of
/// facts, does not count): it has a question mark, or opens with an interrogative.
pub fn asks(text: &str) -> bool {
    let first = text.trim_start().split(|c: char| c.is_whitespace() || c == ',').next().unwrap_or("").to_lowercase().replace('’', "'");
    text.contains('?') || INTERROGATIVES.contains(&first.as_str())
}

fn tool_at(e: &Event) -> Option<(&str, Option<&str>, Timestamp)> {
    match e {
        Event::Tool { action, failure_mode, at, .. } => Some((action.as_str(), failure_mode.as_deref(), *at)),
        Event::Message { .. } => None,
    }
}

fn at_of(e: &Event) -> Timestamp {
    match e {
        Event::Message { at, .. } | Event::Tool { at, .. } => *at,
    }
}

/// Fix lessons: failures of one action with one error, and the steps that made it pass.
fn fixes(events: &[Event]) -> Vec<Lesson> {
    // (action, mode) → (failures, last failure, fixes seen: steps → count)
    type Fixes = Vec<(Vec<String>, usize)>;
    let mut seen: Vec<((String, String), usize, Timestamp, Fixes)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Some((action, Some(mode), at)) = tool_at(e) else { continue };
        let key = (action.to_string(), mode.to_string());
        let slot = match seen.iter().position(|(k, ..)| *k == key) {
            Some(p) => p,
            None => {
                seen.push((key.clone(), 0, at, Vec::new()));
                seen.len() - 1
            }
        };
        seen[slot].1 += 1;
        seen[slot].2 = at;
        // Forward to the same action's next success; what ran in between is the fix.
        let mut steps: Vec<String> = Vec::new();
        for later in &events[i + 1..] {
            if at_of(later).duration_since(at) > SignedDuration::from_mins(FIX_WINDOW_MINS) {
                break;
            }
            let Some((a, failed, _)) = tool_at(later) else { continue };
            if a == action {
                if failed.is_none() && !steps.is_empty() && steps.len() <= MAX_FIX_STEPS {
                    let fixes = &mut seen[slot].3;
                    match fixes.iter_mut().find(|(s, _)| *s == steps) {
                        Some((_, n)) => *n += 1,
                        None => fixes.push((steps.clone(), 1)),
                    }
                }
                break;
            }
            if failed.is_none() && !steps.iter().any(|s| s == a) {
                steps.push(a.to_string());
            }
        }
    }
    seen.into_iter()
        .filter(|(_, failures, ..)| *failures >= 2)
        .filter_map(|((action, mode), failures, last, mut fixes)| {
            fixes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.len().cmp(&b.0.len())));
            let (steps, fixed) = fixes.into_iter().next()?;
            let head = format!("When `{action}` fails with “{}”", cut(&mode, MODE_CHARS));
            let run = steps.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", then ");
            let line = format!("{head}, first run {run}, then retry (fixed it {fixed} of {failures}×, last {})", day(last));
            let mode = Some(mode);
            let members = Vec::new();
            Some(Lesson {
                kind: LessonKind::Fix,
                head,
                line,
                count: failures,
                last,
                action: Some(action),
                mode,
                fix: steps,
                words: None,
                text: None,
                members,
                aliases: Vec::new(),
            })
        })
        .collect()
}

/// The agent's step a user's message at `i` answers: a tool call's action, or `None` for
/// an assistant message; `Err` when it answers nothing of the agent's.
fn answered(events: &[Event], i: usize) -> Result<Option<String>, ()> {
    let at = at_of(&events[i]);
    let prev = events[..i].iter().rev().find(|e| !matches!(e, Event::Message { role: Some(r), .. } if r == "user")).ok_or(())?;
    if at.duration_since(at_of(prev)) > SignedDuration::from_mins(CORRECTION_WINDOW_MINS) {
        return Err(());
    }
    match prev {
        Event::Tool { action, .. } => Ok(Some(action.clone())),
        Event::Message { role: Some(r), .. } if r == "assistant" => Ok(None),
        _ => Err(()),
    }
}

fn user_messages(events: &[Event]) -> impl Iterator<Item = (usize, &str, Timestamp)> {
    events.iter().enumerate().filter_map(|(i, e)| match e {
        Event::Message { role: Some(r), text, at, .. } if r == "user" => Some((i, text.as_str(), *at)),
        _ => None,
    })
}

/// User messages that say the same thing (corrections of one action, or one question).
struct Group {
    action: Option<String>,
    /// Every wording seen, the first first.
    members: Vec<String>,
    /// The first wording (questions) or the latest (corrections).
    text: String,
    days: BTreeSet<String>,
    count: usize,
    last: Timestamp,
    standing: bool,
}

impl Group {
    fn new(action: Option<String>, text: &str, at: Timestamp) -> Group {
        let members = vec![text.to_string()];
        Group { action, members, text: text.to_string(), days: BTreeSet::from([day(at)]), count: 1, last: at, standing: false }
    }

    fn add(&mut self, text: &str, at: Timestamp) {
        self.days.insert(day(at));
        self.count += 1;
        self.last = at;
        if !self.members.iter().any(|m| m == text) {
            self.members.push(text.to_string());
        }
    }

    fn says(&self, meanings: &Meanings, text: &str) -> bool {
        self.members.iter().any(|m| meanings.same(m, text))
    }

    fn words(&self) -> Option<String> {
        Some(content_words(&self.members[0]).into_iter().collect::<Vec<_>>().join(" "))
    }
}

/// Correction lessons: the user correcting the same action (or in the same words) again,
/// or once in a standing rule.
fn corrections(events: &[Event], meanings: &Meanings) -> Vec<Lesson> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, text, at) in user_messages(events) {
        if !meanings.corrects(text) {
            continue;
        }
        let Ok(action) = answered(events, i) else { continue };
        // A reply to a message must say what to do: "no, the other file" says nothing
        // that outlives its moment.
        if action.is_none() && content_words(text).len() < MIN_RULE_WORDS {
            continue;
        }
        let standing = STANDING.iter().any(|w| text.to_lowercase().contains(w));
        let same = groups.iter_mut().find(|g| (action.is_some() && g.action == action) || g.says(meanings, text));
        let group = match same {
            Some(g) => {
                g.add(text, at);
                g.text = text.to_string();
                g
            }
            None => {
                groups.push(Group::new(action, text, at));
                groups.last_mut().expect("just pushed")
            }
        };
        group.standing |= standing;
    }
    groups
        .into_iter()
        .filter(|g| g.count >= 2 || g.standing)
        .map(|g| {
            let (head, line) = match &g.action {
                Some(a) => {
                    let head = format!("After `{a}`, the user corrected the agent");
                    let line = format!("{head} ({}×, last {}): “{}”", g.count, day(g.last), quote(&g.text));
                    (head, line)
                }
                None => {
                    let head = format!("{CORRECTION_OPENING}{}”", quote(&g.members[0]));
                    let line = format!("{head} ({}×, last {})", g.count, day(g.last));
                    (head, line)
                }
            };
            Lesson {
                kind: LessonKind::Correction,
                head,
                line,
                count: g.count,
                last: g.last,
                words: g.words(),
                text: Some(g.members[0].clone()),
                members: g.members.clone(),
                aliases: Vec::new(),
                action: g.action,
                mode: None,
                fix: Vec::new(),
            }
        })
        .collect()
}

/// Repeated-question lessons: the same question on two or more days.
fn questions(events: &[Event], meanings: &Meanings) -> Vec<Lesson> {
    let mut groups: Vec<Group> = Vec::new();
    for (_, text, at) in user_messages(events) {
        // A correction worded as a question ("why did you delete the tests?") is the
        // correction's lesson, not a question to keep an answer for.
        if !asks(text) || content_words(text).len() < 2 || (meanings.by_layer() && meanings.corrects(text)) {
            continue;
        }
        match groups.iter_mut().find(|g| g.says(meanings, text)) {
            Some(g) => g.add(text, at),
            None => groups.push(Group::new(None, text, at)),
        }
    }
    groups
        .into_iter()
        .filter(|g| g.days.len() >= 2)
        .map(|g| {
            let head = format!("{QUESTION_OPENING}{}”", quote(&g.members[0]));
            let line = format!("{head} ({}×, last {}): put the answer in MEMORY.md", g.count, day(g.last));
            let text = Some(g.members[0].clone());
            let (count, last, words, members) = (g.count, g.last, g.words(), g.members);
            let aliases = Vec::new();
            Lesson {
                kind: LessonKind::Question,
                head,
                line,
                count,
                last,
                words,
                text,
                members,
                aliases,
                action: None,
                mode: None,
                fix: Vec::new(),
            }
        })
        .collect()
}

/// The lessons in `history` (oldest events first): fixes, then corrections, then
/// repeated questions, each group with the most frequent first.
pub fn learn(history: &History, meanings: &Meanings) -> Vec<Lesson> {
    let mut out = Vec::new();
    for mut group in [fixes(&history.events), corrections(&history.events, meanings), questions(&history.events, meanings)] {
        group.sort_by(|a, b| b.count.cmp(&a.count).then(a.head.cmp(&b.head)));
        out.extend(group);
    }
    out
}

/// The heads of the lessons delivered as tips in `lines` (tick lines' `actionTaken.lesson`).
pub fn delivered(lines: &[mneme_workspace::playbook_log::LogLine]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.kind == "tick")
        .filter_map(|l| l.value["actionTaken"]["lesson"]["head"].as_str().map(str::to_string))
        .collect()
}

/// A lesson as an output line records it, for [`observe`] to score later.
pub fn trigger(lesson: &Lesson) -> serde_json::Value {
    serde_json::json!({
        "kind": lesson.kind, "head": lesson.head, "action": lesson.action, "mode": lesson.mode,
        "words": lesson.words, "text": lesson.text,
    })
}

/// What happened after a tip about `trigger` delivered at `since`: a score in [-1, 1] and
/// the evidence, or `None` while nothing shows either way.
pub fn observe(history: &History, meanings: &Meanings, trigger: &serde_json::Value, since: Timestamp) -> Option<(f64, String)> {
    let text = |k: &str| trigger[k].as_str();
    match trigger["kind"].as_str()? {
        "fix" => {
            let (action, mode) = (text("action")?, text("mode")?);
            let runs: Vec<Option<&str>> = history
                .events
                .iter()
                .filter(|e| at_of(e) > since)
                .filter_map(tool_at)
                .filter(|(a, ..)| *a == action)
                .map(|(_, failed, _)| failed)
                .collect();
            if let Some(n) = Some(runs.iter().filter(|f| **f == Some(mode)).count()).filter(|n| *n > 0) {
                Some((-0.5, format!("`{action}` failed with the same error {n}× after the tip")))
            } else if !runs.is_empty() && runs.iter().all(Option::is_none) {
                Some((0.6, format!("`{action}` ran {}× after the tip without the error", runs.len())))
            } else {
                None
            }
        }
        kind @ ("correction" | "question") => {
            let words: BTreeSet<String> = text("words")?.split(' ').map(str::to_string).collect();
            let first = text("text");
            let action = text("action");
            let again = user_messages(&history.events)
                .filter(|(i, said, at)| {
                    *at > since && {
                        let same = match first {
                            Some(first) => meanings.same(first, said),
                            None => jaccard(&content_words(said), &words) >= SAME_WORDS,
                        };
                        if kind == "question" {
                            same && asks(said)
                        } else {
                            let corrected = answered(&history.events, *i).ok().flatten();
                            meanings.corrects(said) && (same || (action.is_some() && corrected.as_deref() == action))
                        }
                    }
                })
                .count();
            if again > 0 {
                return Some((-0.5, format!("the same {kind} came back {again}× after the tip")));
            }
            // Quiet is evidence only once the user has been around: on QUIET_DAYS days
            // with their messages after the tip, and (a corrected action) without the
            // action running again.
            let days: BTreeSet<String> =
                user_messages(&history.events).filter(|(_, _, at)| *at > since).map(|(_, _, at)| day(at)).collect();
            let reran = action.is_some_and(|a| history.events.iter().any(|e| at_of(e) > since && tool_at(e).is_some_and(|(x, ..)| x == a)));
            (days.len() >= QUIET_DAYS && !reran).then(|| {
                let what = match action {
                    Some(a) => format!("`{a}` has not run again and the correction has not come back"),
                    None => format!("the {kind} has not come back"),
                };
                (0.4, format!("{what} in {} days of the user's messages after the tip", days.len()))
            })
        }
        _ => None,
    }
}
