//! The memory miner (sinain §4.5), Phase 3 step 1, on idle ticks only: daily memory
//! files not mined yet, cross-referenced with the playbook.
//!
//! 1. The mining index (the playbook's `<!-- mining-index: … -->`) lists the days mined.
//! 2. Candidates: `memory/YYYY-MM-DD.md` files of the window (7 days by default), before
//!    today (today's file is still growing), not in the index.
//! 3. At most [`FILES_PER_RUN`] per run, newest first, plus `memory/devmatrix-summary.md`
//!    when present; each file at most [`MAX_FILE_CHARS`] characters.
//! 4. The model finds patterns, contradictions and preferences; offline, the fallback
//!    does: patterns are the lines the notes mark as lessons (`Lesson:`, `Tip:`,
//!    `Learned:`, `Rule:`, `TIL:`, …), preferences the lines worded as one, contradictions
//!    the facts (read with the consolidation patterns) that contradict a playbook line.
//!    Other facts are not patterns: they belong to the memory, which already indexes the
//!    notes, and the findings only count them.
//! 5. The new index is the old one plus the mined days, without days older than the
//!    window. **When the configured model fails, the index is unchanged**, so the files
//!    are mined again next time (the fallback's findings are still used this tick).
//!
//! The index is not written here: the curator writes it with the playbook, in one atomic
//! write, so a crash before that mines the same files again.

use jiff::civil::Date;
use mneme_workspace::playbook::{Playbook, normalize};
use mneme_workspace::{WorkspaceSettings, paths};
use serde::Serialize;
use serde_json::{Value, json};

use super::config::Stage;
use super::engine::{NO_LLM, Reflector, StageOutcome, strings};

/// Most daily files one run mines.
pub const FILES_PER_RUN: usize = 2;
/// Characters of a file the miner reads.
pub const MAX_FILE_CHARS: usize = 12_000;
/// Optional context file (the seed's devmatrix summary).
pub const DEVMATRIX_SUMMARY: &str = "memory/devmatrix-summary.md";

/// What the miner found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Mining {
    pub findings: String,
    #[serde(rename = "newPatterns")]
    pub new_patterns: Vec<String>,
    pub contradictions: Vec<String>,
    pub preferences: Vec<String>,
    #[serde(rename = "minedSources")]
    pub mined_sources: Vec<String>,
    /// The mining index after this run; `None`: unchanged (nothing mined, or the model
    /// failed and the files wait for the next run).
    #[serde(rename = "newIndex")]
    pub new_index: Option<Vec<Date>>,
}

/// The days to mine now, newest first.
pub fn candidates(settings: &WorkspaceSettings, index: &[Date], today: Date, window_days: u32) -> Vec<Date> {
    let Ok(dir) = paths::resolve(&settings.dir, paths::MEMORY_DIR) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let oldest = today - jiff::Span::new().days(i64::from(window_days));
    let mut days: Vec<Date> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".md")?.parse::<Date>().ok())
        .filter(|d| *d >= oldest && *d < today && !index.contains(d))
        .collect();
    days.sort_unstable_by(|a, b| b.cmp(a));
    days.truncate(FILES_PER_RUN);
    days
}

fn read_capped(settings: &WorkspaceSettings, relative: &str) -> Option<String> {
    let path = paths::resolve(&settings.dir, relative).ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.chars().take(MAX_FILE_CHARS).collect())
}

const PREFERENCE_WORDS: [&str; 6] = ["prefer", "always", "never", "don't", "do not", "rather"];
/// How notes mark a line as a lesson for the playbook (lower case, with the colon).
pub const LESSON_MARKERS: [&str; 8] = ["lesson:", "lesson learned:", "tip:", "learned:", "rule:", "pattern:", "til:", "note to self:"];

/// The line's lesson, when the notes mark it as one.
fn marked_lesson(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    let marker = LESSON_MARKERS.iter().find(|m| lower.starts_with(*m))?;
    let rest = line[marker.len()..].trim();
    (rest.split_whitespace().count() >= 3).then(|| rest.to_string())
}

/// The offline miner over these files' text.
pub fn fallback(files: &[(String, String)], playbook: &Playbook) -> Mining {
    let known: Vec<String> = playbook.patterns().iter().map(|(_, p)| p.key()).collect();
    let lines: Vec<String> = playbook.patterns().into_iter().map(|(_, p)| p.text).collect();
    let mut mining = Mining::default();
    let mut facts = 0;
    for (_, text) in files {
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let line = line.trim_start_matches(['-', '*', ' ']);
            let lower = line.to_lowercase();
            if let Some(lesson) = marked_lesson(line) {
                if !known.contains(&normalize(&lesson)) && !mining.new_patterns.contains(&lesson) {
                    mining.new_patterns.push(lesson);
                }
                continue;
            }
            if PREFERENCE_WORDS.iter().any(|w| lower.contains(w)) && line.len() <= 200 {
                let p = line.to_string();
                // As the tick writes it: "User preference: …".
                let key = normalize(&format!("User preference: {p}"));
                if !mining.preferences.contains(&p) && !known.contains(&key) && !known.contains(&normalize(&p)) {
                    mining.preferences.push(p);
                }
                continue;
            }
            for t in mneme_truth::patterns::extract(line) {
                let fact = format!("{} {} {}", t.subject, t.predicate, t.object);
                // A playbook line about the same subject and predicate with another object.
                let head = normalize(&format!("{} {}", t.subject, t.predicate));
                let conflict = lines.iter().find(|l| {
                    let n = normalize(l);
                    n.starts_with(&head) && !n.contains(&normalize(&t.object))
                });
                if let Some(l) = conflict {
                    let c = format!("playbook entry \"{l}\" contradicts observation \"{fact}\"");
                    if !mining.contradictions.contains(&c) {
                        mining.contradictions.push(c);
                    }
                } else {
                    facts += 1;
                }
            }
        }
    }
    for list in [&mut mining.new_patterns, &mut mining.contradictions, &mut mining.preferences] {
        list.truncate(10);
    }
    mining.findings = format!(
        "{} file(s) read: {} new pattern(s), {} contradiction(s), {} preference(s) found by the offline rules; {} fact(s) left to the memory.",
        files.len(),
        mining.new_patterns.len(),
        mining.contradictions.len(),
        mining.preferences.len(),
        facts
    );
    mining
}

const PROMPT: &str = "You deep-mine an AI agent's daily memory files against its current playbook. Summarise the \
findings in 2-3 sentences, list new reusable patterns (short imperative lines), contradictions between playbook \
entries and what the files show (\"playbook entry X contradicts observation Y\"), and the user's preferences. \
Answer only JSON: {\"findings\": \"...\", \"newPatterns\": [\"...\"], \"contradictions\": [\"...\"], \
\"preferences\": [\"...\"], \"minedSources\": [\"YYYY-MM-DD.md\"]}";

/// Checks a model's answer.
pub fn validate(v: &Value, sent: &[String]) -> Result<Mining, String> {
    let findings = v.get("findings").and_then(Value::as_str).ok_or("findings: missing or not a string")?;
    let mut m = Mining {
        findings: findings.trim().chars().take(600).collect(),
        new_patterns: strings(v, "newPatterns", 10, 300)?,
        contradictions: strings(v, "contradictions", 10, 300)?,
        preferences: strings(v, "preferences", 10, 300)?,
        mined_sources: strings(v, "minedSources", 10, 100)?,
        new_index: None,
    };
    // Only what was sent counts as mined.
    if m.mined_sources.is_empty() || m.mined_sources.iter().any(|s| !sent.contains(s)) {
        m.mined_sources = sent.to_vec();
    }
    Ok(m)
}

/// Runs the miner (the tick calls it on idle ticks only).
pub fn mine(engine: &Reflector, settings: &WorkspaceSettings, playbook: &Playbook, today: Date) -> (Mining, StageOutcome) {
    let window = engine.config.mining_window_days;
    let index = playbook.mining_index();
    let days = candidates(settings, &index, today, window);
    if days.is_empty() {
        return (Mining::default(), StageOutcome::skipped("no unmined daily files in the window"));
    }
    let mut files: Vec<(String, String)> = days
        .iter()
        .filter_map(|d| {
            let name = format!("{d}.md");
            read_capped(settings, &format!("{}/{name}", paths::MEMORY_DIR)).map(|t| (name, t))
        })
        .collect();
    let sent: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let context = read_capped(settings, DEVMATRIX_SUMMARY);
    let oldest = today - jiff::Span::new().days(i64::from(window));
    let next_index = |mined: &[String]| -> Vec<Date> {
        let mut all: Vec<Date> = index.iter().copied().chain(mined.iter().filter_map(|n| n.trim_end_matches(".md").parse().ok())).collect();
        all.retain(|d| *d >= oldest);
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.dedup();
        all
    };
    let user = json!({
        "playbook": playbook.render(),
        "files": files.iter().map(|(n, t)| json!({ "name": n, "text": t })).collect::<Vec<_>>(),
        "devmatrixSummary": context,
    })
    .to_string();
    let offline = |reason: String, index_moves: bool, files: &[(String, String)]| {
        let mut m = fallback(files, playbook);
        m.mined_sources = sent.clone();
        m.new_index = index_moves.then(|| next_index(&sent));
        (m, StageOutcome::fallback(reason))
    };
    match engine.ask(Stage::MemoryMiner, PROMPT, &user) {
        Ok(v) => match validate(&v, &sent) {
            Ok(mut m) => {
                m.new_index = Some(next_index(&m.mined_sources));
                (m, StageOutcome::ok())
            }
            Err(e) => offline(format!("invalid model answer: {e}; index unchanged, retried next run"), false, &files),
        },
        // No model at all: the offline miner is the miner, and its run counts.
        Err(reason) if reason == NO_LLM => offline(reason, true, &files),
        Err(reason) => {
            let r = format!("{reason}; index unchanged, retried next run");
            files.truncate(FILES_PER_RUN);
            offline(r, false, &files)
        }
    }
}
