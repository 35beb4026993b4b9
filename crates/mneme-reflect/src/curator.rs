//! The playbook curator without a model (sinain §4.6, the spec's offline path): the
//! three laws in order (never remove error-prevention patterns; keep high-scoring ones;
//! then evolve), the stale-item lifecycle, and the 50-line body.
//!
//! - **Evolve**: the miner's new patterns are added under `## Patterns` (unless the
//!   directive is `stability`, which only admits patterns scoring above 0.5, and mined
//!   patterns carry no score); fixable items (contradictions, repeated errors) are added
//!   under `## Error prevention` marked `[since: today]`. Under `aggressive_prune` up to
//!   [`PRUNE_PER_TICK`] weak patterns go: no score, no marker, not protected.
//! - **Lessons** (`lessons`, with or without a model): each lesson's line is added under
//!   its section, or, when a line with its head is there, updated in place (the evidence
//!   grew), so one lesson is one line. A fix lesson resolves the `Recurring error: MODE`
//!   item tracked for its error: the tracker is replaced by the fix. A new pattern whose
//!   content words match a line already there (Jaccard ≥ [`SAME_PATTERN`]) or that is a
//!   copied chat line (`user: …`, `[12:30] …`) is not added. A lesson whose tip was
//!   scored by what followed it carries that score as its `(score: …)` marker.
//! - **Stale items**: a `[since:]` item two days old or more is due for a mandatory action
//!   (the tick's Phase 2); after [`ACTIONS_BEFORE_DEFERRAL`] actions it becomes
//!   `[deferred: today, reason: "..."]`; at most [`MAX_DEFERRED`] stay deferred, the
//!   oldest goes first.
//! - **50 lines**: over [`BODY_LIMIT`], lines go in this order: repeated blank lines,
//!   unprotected unscored patterns from the bottom, the lowest-scored unprotected ones,
//!   the oldest deferred, then protected ones from the bottom (the archive copy the
//!   caller writes first keeps every one of them).

use std::collections::BTreeMap;

use jiff::civil::Date;
use mneme_workspace::playbook::{BODY_LIMIT, PatternLine, Playbook, normalize};
use serde::Serialize;
use serde_json::Value;

use super::feedback::Directive;
use super::lessons::{Lesson, LessonKind, content_words, jaccard};

/// Most weak patterns one tick prunes under `aggressive_prune`.
pub const PRUNE_PER_TICK: usize = 3;
/// Mandatory actions on a stale item before it is deferred.
pub const ACTIONS_BEFORE_DEFERRAL: u32 = 3;
/// Most deferred items kept.
pub const MAX_DEFERRED: usize = 5;
/// Days after `[since:]` when an item is stale (the seed's 48 hours, in whole days).
pub const STALE_AFTER_DAYS: i32 = 2;
/// A pattern scoring this or more is high-scoring (the second law).
pub const HIGH_SCORE: f64 = 0.5;
/// A new pattern sharing this share of its content words with a line already there says
/// the same (Jaccard).
pub const SAME_PATTERN: f64 = 0.8;

/// What the curator works from.
#[derive(Debug, Clone)]
pub struct CurateInput<'a> {
    pub playbook: &'a Playbook,
    pub directive: Directive,
    /// New reusable patterns (the miner's).
    pub new_patterns: &'a [String],
    /// Fixable problems to track (contradictions, repeated errors).
    pub fixable: &'a [String],
    /// Mandatory actions already taken per stale item (by pattern key).
    pub stale_actions: &'a BTreeMap<String, u32>,
    /// What the heartbeat learned this week, one line each.
    pub lessons: &'a [Lesson],
    /// Lesson heads whose tip was scored by what followed it, and the score: the line's
    /// `(score: …)` marker, so law 2 keeps what worked and pruning sees what did not.
    pub scored: &'a [(String, f64)],
    pub today: Date,
}

/// What changed, as the tick log records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub pruned: Vec<String>,
    pub promoted: Vec<String>,
    /// Lesson lines whose evidence changed (the new text).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub updated: Vec<String>,
    /// Tracked errors a learned fix resolved (their text).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<String>,
}

/// The curated playbook and what happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curation {
    #[serde(skip)]
    pub playbook: Playbook,
    pub changes: Changes,
    /// What the stale lifecycle did ("deferred: …", "dropped deferred: …").
    #[serde(rename = "staleItemActions")]
    pub stale_item_actions: Vec<String>,
    /// Stale items due for a mandatory action this tick (their text).
    #[serde(rename = "staleDue")]
    pub stale_due: Vec<String>,
    #[serde(rename = "playbookLines")]
    pub playbook_lines: usize,
}

/// The heading a body line sits under, for every line.
fn headings(body: &[String]) -> Vec<Option<String>> {
    let mut current = None;
    body.iter()
        .map(|l| {
            if let Some(h) = l.trim_start().strip_prefix('#') {
                current = Some(h.trim_start_matches('#').trim().to_string());
            }
            current.clone()
        })
        .collect()
}

/// Inserts `line` at the end of the section `heading` (created at the end of the body
/// when missing), before the section's trailing blank lines.
fn add_to_section(body: &mut Vec<String>, heading: &str, line: String) {
    let want = normalize(heading);
    let start = body.iter().position(|l| l.trim_start().starts_with('#') && normalize(l) == want);
    let Some(start) = start else {
        if body.last().is_some_and(|l| !l.trim().is_empty()) {
            body.push(String::new());
        }
        body.push(format!("## {heading}"));
        body.push(line);
        return;
    };
    let end = body[start + 1..].iter().position(|l| l.trim_start().starts_with('#')).map_or(body.len(), |i| start + 1 + i);
    let mut at = end;
    while at > start + 1 && body[at - 1].trim().is_empty() {
        at -= 1;
    }
    body.insert(at, line);
}

/// Adds a fixable item under `## Error prevention`, marked `[since: today]`; returns its text.
fn track_fixable(body: &mut Vec<String>, text: &str, today: Date) -> String {
    let line = PatternLine {
        bullet: "-".into(),
        text: text.trim().to_string(),
        score: None,
        since: Some(today),
        deferred: None,
        established: false,
    };
    add_to_section(body, "Error prevention", line.render());
    line.text
}

/// Whether `text` is a line copied from a chat or a log rather than a pattern: it opens
/// with a speaker (`user:`, `assistant:`, `> `) or a clock time (`[12:30]`, `12:30 `).
pub fn is_chat_copy(text: &str) -> bool {
    let t = text.trim_start().to_lowercase();
    let speaker = ["user:", "assistant:", "agent:", "human:", "ai:", "me:", "> "].iter().any(|p| t.starts_with(p));
    let clock = t.trim_start_matches('[').split([' ', ']']).next().is_some_and(|w| {
        let parts: Vec<&str> = w.split(':').collect();
        parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_digit()))
    });
    speaker || clock
}

/// Whether `text` says what one of `lines` already says (content words, Jaccard).
fn says_the_same(text: &str, lines: &[String]) -> bool {
    let words = content_words(text);
    !words.is_empty() && lines.iter().any(|l| jaccard(&words, &content_words(l)) >= SAME_PATTERN)
}

/// Sets the `(score: …)` marker of each scored lesson's line (found by its head).
fn score_lessons(playbook: &mut Playbook, scored: &[(String, f64)], changes: &mut Changes) {
    for (head, score) in scored {
        let head = normalize(head);
        for line in playbook.body.iter_mut() {
            let Some(mut p) = PatternLine::parse(line) else { continue };
            if !head.is_empty() && p.key().starts_with(&head) && p.score != Some(*score) {
                p.score = Some(*score);
                *line = p.render();
                changes.updated.push(p.text.clone());
            }
        }
    }
}

/// Puts each lesson's line in the playbook: updated in place when a line with its head is
/// there, else added under its section; a fix resolves its tracked `Recurring error`.
fn apply_lessons(playbook: &mut Playbook, lessons: &[Lesson], changes: &mut Changes) {
    for lesson in lessons {
        let existing = playbook.body.iter().position(|l| PatternLine::parse(l).is_some_and(|p| lesson.is_line(&p.text)));
        match existing {
            Some(i) => {
                let Some(mut p) = PatternLine::parse(&playbook.body[i]) else { continue };
                if p.text != lesson.line {
                    p.text = lesson.line.clone();
                    playbook.body[i] = p.render();
                    changes.updated.push(lesson.line.clone());
                }
            }
            None => {
                add_to_section(&mut playbook.body, lesson.section(), format!("- {}", lesson.line));
                changes.added.push(lesson.line.clone());
            }
        }
        if let (LessonKind::Fix, Some(mode)) = (lesson.kind, &lesson.mode) {
            let tracker = normalize(&format!("Recurring error: {mode}"));
            if let Some(i) = playbook.body.iter().position(|l| PatternLine::parse(l).is_some_and(|p| p.key() == tracker)) {
                let removed = playbook.body.remove(i);
                changes.resolved.push(PatternLine::parse(&removed).map(|p| p.text).unwrap_or(removed));
            }
        }
    }
}

/// Curates `input.playbook` without a model.
pub fn curate_offline(input: &CurateInput<'_>) -> Curation {
    let mut playbook = input.playbook.clone();
    let mut changes = Changes::default();
    let known: Vec<String> = playbook.patterns().iter().map(|(_, p)| p.key()).collect();
    let mut seen = known.clone();

    // Evolve (the third law): lessons (and their observed scores), fixable items, then
    // new patterns.
    apply_lessons(&mut playbook, input.lessons, &mut changes);
    score_lessons(&mut playbook, input.scored, &mut changes);
    for text in input.fixable {
        let key = normalize(text);
        if key.is_empty() || seen.contains(&key) {
            continue;
        }
        changes.added.push(track_fixable(&mut playbook.body, text, input.today));
        seen.push(key);
    }
    if input.directive != Directive::Stability {
        let mut texts: Vec<String> = playbook.patterns().into_iter().map(|(_, p)| p.text).collect();
        for text in input.new_patterns {
            let key = normalize(text);
            if key.is_empty() || seen.contains(&key) || is_chat_copy(text) || says_the_same(text, &texts) {
                continue;
            }
            texts.push(text.trim().to_string());
            add_to_section(&mut playbook.body, "Patterns", format!("- {}", text.trim()));
            changes.added.push(text.trim().to_string());
            seen.push(key);
        }
    }

    // Prune weak patterns (never protected, high-scoring, marked or just added ones).
    if input.directive == Directive::AggressivePrune {
        let heads = headings(&playbook.body);
        let mut weak: Vec<usize> = playbook
            .body
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let p = PatternLine::parse(l)?;
                let weak = p.score.is_none() && p.since.is_none() && p.deferred.is_none() && !p.established;
                (weak && !p.is_protected(heads[i].as_deref()) && known.contains(&p.key())).then_some(i)
            })
            .collect();
        weak.reverse();
        for i in weak.into_iter().take(PRUNE_PER_TICK).collect::<Vec<_>>() {
            let removed = playbook.body.remove(i);
            changes.pruned.push(PatternLine::parse(&removed).map(|p| p.text).unwrap_or(removed));
        }
    }

    finish(playbook, input, changes)
}

/// What every curation ends with, model or not: the stale lifecycle, at most
/// [`MAX_DEFERRED`] deferred items, and the 50-line body.
fn finish(mut playbook: Playbook, input: &CurateInput<'_>, mut changes: Changes) -> Curation {
    let mut stale_item_actions = Vec::new();
    // The stale lifecycle.
    let mut stale_due = Vec::new();
    for line in playbook.body.iter_mut() {
        let Some(mut p) = PatternLine::parse(line) else { continue };
        let Some(since) = p.since else { continue };
        let actions = input.stale_actions.get(&p.key()).copied().unwrap_or(0);
        if actions >= ACTIONS_BEFORE_DEFERRAL {
            p.since = None;
            p.deferred = Some((input.today, format!("{actions} actions without resolution")));
            stale_item_actions.push(format!("deferred: {}", p.text));
            *line = p.render();
        } else if (input.today - since).get_days() >= STALE_AFTER_DAYS {
            stale_due.push(p.text.clone());
        }
    }
    let mut deferred: Vec<(Date, usize)> =
        playbook.body.iter().enumerate().filter_map(|(i, l)| PatternLine::parse(l).and_then(|p| p.deferred.map(|(d, _)| (d, i)))).collect();
    if deferred.len() > MAX_DEFERRED {
        deferred.sort();
        let mut drop: Vec<usize> = deferred[..deferred.len() - MAX_DEFERRED].iter().map(|(_, i)| *i).collect();
        drop.sort_unstable_by(|a, b| b.cmp(a));
        for i in drop {
            let removed = playbook.body.remove(i);
            let text = PatternLine::parse(&removed).map(|p| p.text).unwrap_or(removed);
            stale_item_actions.push(format!("dropped deferred: {text}"));
            changes.pruned.push(text);
        }
    }

    for removed in enforce_limit(&mut playbook.body) {
        changes.pruned.push(removed);
    }
    let playbook_lines = playbook.body.len();
    Curation { playbook, changes, stale_item_actions, stale_due, playbook_lines }
}

/// The `[since:]` items due for a mandatory action at `today`: tracked for
/// [`STALE_AFTER_DAYS`] or more, fewer than [`ACTIONS_BEFORE_DEFERRAL`] actions so far, and
/// none in the last day (`acted_today`, by key). The seed says "mandatory action" without
/// a rate; one a day keeps a stale item from taking three ticks in a row and being
/// deferred within the hour.
pub fn stale_due(playbook: &Playbook, stale_actions: &BTreeMap<String, u32>, acted_today: &[String], today: Date) -> Vec<String> {
    playbook
        .patterns()
        .into_iter()
        .filter_map(|(_, p)| {
            let since = p.since?;
            let key = p.key();
            let acted = stale_actions.get(&key).copied().unwrap_or(0);
            let due = (today - since).get_days() >= STALE_AFTER_DAYS && acted < ACTIONS_BEFORE_DEFERRAL && !acted_today.contains(&key);
            due.then_some(p.text)
        })
        .collect()
}

/// Trims `body` to [`BODY_LIMIT`] lines in the module's order; returns what went.
pub fn enforce_limit(body: &mut Vec<String>) -> Vec<String> {
    let mut removed = Vec::new();
    // Repeated blank lines first.
    let mut i = 1;
    while body.len() > BODY_LIMIT && i < body.len() {
        if body[i].trim().is_empty() && body[i - 1].trim().is_empty() {
            body.remove(i);
        } else {
            i += 1;
        }
    }
    // Then patterns, by rank: unprotected unscored (bottom first), unprotected by score
    // (lowest first), deferred (oldest first), protected (bottom first).
    while body.len() > BODY_LIMIT {
        let heads = headings(body);
        let candidates: Vec<(u8, f64, i64, usize)> = body
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let p = PatternLine::parse(l)?;
                let protected = p.is_protected(heads[i].as_deref());
                let bottom = -(i as i64);
                Some(match (&p.deferred, protected, p.score) {
                    (Some((d, _)), _, _) => (2, 0.0, i64::from(d.year()) * 400 + i64::from(d.day_of_year()), i),
                    (None, false, None) => (0, 0.0, bottom, i),
                    (None, false, Some(s)) if s < HIGH_SCORE => (1, s, bottom, i),
                    (None, false, Some(s)) => (3, s, bottom, i),
                    (None, true, _) => (4, 0.0, bottom, i),
                })
            })
            .collect();
        let victim = candidates.into_iter().min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2))).map(|c| c.3);
        // No pattern left to drop: plain lines go from the bottom.
        let at = victim.unwrap_or(body.len() - 1);
        let line = body.remove(at);
        removed.push(PatternLine::parse(&line).map(|p| p.text).unwrap_or(line));
    }
    removed
}

const PROMPT: &str = "You curate an AI agent's playbook: the patterns it follows. Three laws, in this order: (1) never \
remove error-prevention patterns; (2) preserve high-scoring approaches (score 0.5 or more); (3) then evolve: merge \
duplicates, sharpen wording, integrate the mining findings and new patterns, drop what the feedback shows does not \
work. Follow the directive. Track each new fixable problem as a bullet ending in [since: TODAY]; keep existing \
[since: ...], [deferred: ...] and (score: ...) markers as they are. Keep Markdown headings and bullets; the body \
must stay within 50 lines. Answer only JSON: {\"body\": \"the whole new body as Markdown\"}";

/// Checks a model's answer: the new body, as one string or a list of lines.
pub fn validate(v: &Value) -> Result<Vec<String>, String> {
    let body: Vec<String> = match v.get("body") {
        Some(Value::String(s)) => s.lines().map(|l| l.trim_end().to_string()).collect(),
        Some(Value::Array(lines)) => lines
            .iter()
            .map(|l| l.as_str().map(|s| s.trim_end().to_string()).ok_or("body: not a list of strings"))
            .collect::<Result<_, _>>()?,
        _ => return Err("body: missing, or neither a string nor a list of lines".into()),
    };
    if body.iter().all(|l| l.trim().is_empty()) {
        return Err("body: empty".into());
    }
    if body.len() > 4 * BODY_LIMIT {
        return Err(format!("body: {} lines, far beyond the {BODY_LIMIT}-line limit", body.len()));
    }
    if body.iter().any(|l| l.trim_start().starts_with("<!--")) {
        return Err("body: contains HTML comments (the header and footer are not the model's)".into());
    }
    Ok(body)
}

/// The model's body, held to the laws mechanically: protected and high-scoring lines it
/// dropped come back; markers it dropped from kept lines come back; fixable items are
/// tracked; under `stability` only new lines scoring above 0.5 stay. Then the offline
/// stale lifecycle and the 50-line limit. `changes` are computed by comparing keys.
pub fn govern(input: &CurateInput<'_>, proposed: Vec<String>) -> Curation {
    let old = input.playbook.patterns();
    let old_keys: Vec<String> = old.iter().map(|(_, p)| p.key()).collect();
    let mut playbook = input.playbook.clone();
    playbook.body = proposed;
    // Markers the model dropped from lines it kept.
    for line in playbook.body.iter_mut() {
        let Some(mut p) = PatternLine::parse(line) else { continue };
        if let Some((_, before)) = old.iter().find(|(_, o)| o.key() == p.key()) {
            p.since = p.since.or(before.since);
            p.deferred = p.deferred.clone().or(before.deferred.clone());
            p.score = p.score.or(before.score);
            p.established |= before.established;
            *line = p.render();
        }
    }
    // Under stability, new unscored or low-scored lines go again.
    if input.directive == Directive::Stability {
        let fixable: Vec<String> = input.fixable.iter().map(|f| normalize(f)).collect();
        playbook.body.retain(|l| match PatternLine::parse(l) {
            Some(p) => old_keys.contains(&p.key()) || fixable.contains(&p.key()) || p.score.is_some_and(|s| s > HIGH_SCORE),
            None => true,
        });
    }
    // Laws 1 and 2: what the model may not remove.
    let now_keys: Vec<String> = playbook.patterns().iter().map(|(_, p)| p.key()).collect();
    for (heading, p) in &old {
        let keep = p.is_protected(heading.as_deref()) || p.score.is_some_and(|s| s >= HIGH_SCORE);
        if keep && !now_keys.contains(&p.key()) {
            add_to_section(&mut playbook.body, heading.as_deref().unwrap_or("Patterns"), p.render());
        }
    }
    // Lessons and fixable items are in the playbook whatever the model wrote.
    let mut lesson_changes = Changes::default();
    apply_lessons(&mut playbook, input.lessons, &mut lesson_changes);
    score_lessons(&mut playbook, input.scored, &mut lesson_changes);
    let present: Vec<String> = playbook.patterns().iter().map(|(_, p)| p.key()).collect();
    for text in input.fixable {
        let key = normalize(text);
        if !key.is_empty() && !present.contains(&key) {
            track_fixable(&mut playbook.body, text, input.today);
        }
    }
    let new = playbook.patterns();
    let new_keys: Vec<String> = new.iter().map(|(_, p)| p.key()).collect();
    let changes = Changes {
        added: new.iter().filter(|(_, p)| !old_keys.contains(&p.key())).map(|(_, p)| p.text.clone()).collect(),
        pruned: old.iter().filter(|(_, p)| !new_keys.contains(&p.key())).map(|(_, p)| p.text.clone()).collect(),
        promoted: new
            .iter()
            .filter(|(_, p)| p.established && old.iter().any(|(_, o)| o.key() == p.key() && !o.established))
            .map(|(_, p)| p.text.clone())
            .collect(),
        updated: Vec::new(),
        resolved: lesson_changes.resolved,
    };
    finish(playbook, input, changes)
}

/// Curates with the model when one is configured (its body governed by [`govern`]), else
/// offline. `context`: the last tick lines and the mining findings, for the model.
pub fn curate(engine: &super::engine::Reflector, input: &CurateInput<'_>, context: &Value) -> (Curation, super::engine::StageOutcome) {
    use super::engine::StageOutcome;
    let user = serde_json::json!({
        "today": input.today.to_string(),
        "directive": input.directive,
        "directiveMeaning": input.directive.meaning(),
        "body": input.playbook.body.join("\n"),
        "newPatterns": input.new_patterns,
        "fixable": input.fixable,
        "context": context,
    })
    .to_string();
    match engine.ask(super::config::Stage::PlaybookCurator, PROMPT, &user) {
        Ok(v) => match validate(&v) {
            Ok(body) => (govern(input, body), StageOutcome::ok()),
            Err(e) => (curate_offline(input), StageOutcome::fallback(format!("invalid model answer: {e}"))),
        },
        Err(reason) => (curate_offline(input), StageOutcome::fallback(reason)),
    }
}
