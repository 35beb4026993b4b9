//! Module extraction (sinain §5.4–5.5): a knowledge module drawn from the base playbook and
//! the last days of logs (heartbeat logs and daily notes), with the model when one is
//! configured (stage `module_extractor`, fast, 2000 tokens) and a deterministic fallback.
//!
//! The module's `patterns.md` has three sections:
//! - **Established**: strong evidence (the fallback: seen at least twice, or a playbook
//!   score of at least 0.5);
//! - **Emerging**: seen once or twice, plausible but unconfirmed;
//! - **Vocabulary**: domain terms with definitions (the fallback: `Term: definition` lines,
//!   and capitalised terms that recur, with the line they recur in).
//!
//! The module is registered suspended; it is merged only after an explicit `activate`.
//! Nothing inside `<private>` blocks reaches the model or the module.

use std::collections::BTreeMap;

use jiff::Timestamp;
use mneme_workspace::WorkspaceSettings;
use mneme_workspace::modules::{self, Manifest, NewModule, PriorityRange, Triggers};
use mneme_workspace::playbook::{Playbook, normalize};
use serde::Serialize;
use serde_json::Value;

use super::config::Stage;
use super::engine::{Reflector, StageOutcome, strings, text};

/// The priority range of an extracted module (its default is the lower end unless given).
pub const EXTRACTED_RANGE: [i64; 2] = [50, 100];
/// Days of logs read by default.
pub const DEFAULT_DAYS: u32 = 7;
/// The longest look-back: ten years of daily logs.
pub const MAX_DAYS: u32 = 3650;
/// Most characters of playbook and logs sent to the model.
const MODEL_INPUT_CHARS: usize = 12_000;
/// Most items per section.
const MAX_ITEMS: usize = 20;

/// What to extract.
#[derive(Debug, Clone, Default)]
pub struct ExtractRequest {
    pub id: String,
    /// What the module is about, in words (`--domain`).
    pub domain: String,
    /// A display name [default: from the domain].
    pub name: Option<String>,
    /// Trigger keywords [default: the domain's words].
    pub keywords: Vec<String>,
    /// Trigger file globs.
    pub file_patterns: Vec<String>,
    /// The default priority, within [`EXTRACTED_RANGE`] [default: its lower end].
    pub priority: Option<i64>,
    /// Days of logs to read [default: 7].
    pub days: Option<u32>,
    /// Compute everything, write nothing.
    pub dry_run: bool,
}

/// What extraction produced.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Extracted {
    pub id: String,
    /// The module's folder (workspace-relative); `None` on a dry run.
    pub path: Option<String>,
    pub status: &'static str,
    pub manifest: Manifest,
    pub patterns: String,
    pub established: usize,
    pub emerging: usize,
    pub vocabulary: usize,
    /// How the model stage ran (`ok`, or `fallback` with the reason).
    pub stage: StageOutcome,
    /// Lines read: playbook patterns, and log lines.
    pub read: BTreeMap<&'static str, usize>,
    /// The command that activates it.
    pub activate: String,
}

/// Why extraction refused.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Workspace(#[from] mneme_workspace::WorkspaceError),
}

const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "about",
    "from",
    "into",
    "that",
    "this",
    "their",
    "your",
    "our",
    "patterns",
    "pattern",
    "development",
    "work",
    "working",
    "things",
    "stuff",
    "general",
    "domain",
    "module",
    "knowledge",
    "using",
    "use",
    "how",
    "what",
    "when",
];

/// The trigger keywords of a domain description: its words of three or more letters, less
/// common and generic words, lower-cased, in order, without repeats.
pub fn domain_keywords(domain: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in domain.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')) {
        let w = word.trim_matches('-').to_lowercase();
        if w.chars().count() >= 3 && !STOPWORDS.contains(&w.as_str()) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

fn title_case(s: &str) -> String {
    s.split(|c: char| c == '-' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A line the extraction may draw on.
#[derive(Debug, Clone)]
struct Source {
    text: String,
    score: Option<f64>,
}

/// The playbook's patterns and the logs' lines from the last `days` days, private blocks
/// removed.
fn gather(settings: &WorkspaceSettings, now: Timestamp, days: u32) -> Result<(Vec<Source>, Vec<Source>), ExtractError> {
    use mneme_workspace::{paths, private};
    let read = |p: &str| paths::resolve(&settings.dir, p).ok().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    let base = private::strip(&read(paths::PLAYBOOK)).into_owned();
    let playbook: Vec<Source> =
        Playbook::parse(&base).patterns().into_iter().map(|(_, p)| Source { text: p.text.trim().to_string(), score: p.score }).collect();
    let today = settings.today(now);
    let from = today.checked_sub(jiff::Span::new().days(i64::from(days.saturating_sub(1)))).unwrap_or(today);
    let mut logs = Vec::new();
    let mut push = |text: &str| {
        let t = text.trim().trim_start_matches(['-', '*', '#', '>']).trim();
        if t.chars().count() >= 8 {
            logs.push(Source { text: private::strip(t).trim().to_string(), score: None });
        }
    };
    // Daily notes: memory/YYYY-MM-DD.md (snapshots `YYYY-MM-DD-slug.md` too).
    if let Ok(dir) = paths::resolve(&settings.dir, paths::MEMORY_DIR)
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        let mut names: Vec<String> = entries.flatten().filter_map(|e| e.file_name().into_string().ok()).collect();
        names.sort();
        for name in names {
            let Some(day) = name.get(..10).and_then(|d| d.parse::<jiff::civil::Date>().ok()) else { continue };
            if day < from || day > today || !name.ends_with(".md") {
                continue;
            }
            for line in read(&format!("{}/{name}", paths::MEMORY_DIR)).lines() {
                if !line.trim_start().starts_with('#') && !line.trim_start().starts_with("<!--") {
                    push(line);
                }
            }
        }
    }
    // Heartbeat logs: every string in each line (signals, summaries, actions, insights).
    fn strings_of(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
            Value::Object(o) => {
                o.iter().filter(|(k, _)| !matches!(k.as_str(), "kind" | "ts" | "tickId" | "status")).for_each(|(_, x)| strings_of(x, out))
            }
            _ => {}
        }
    }
    for line in mneme_workspace::playbook_log::read(settings, from, today)? {
        let mut found = Vec::new();
        strings_of(&line.value, &mut found);
        for s in found {
            s.lines().for_each(&mut push);
        }
    }
    Ok((playbook, logs))
}

/// One section's items (and the vocabulary's terms).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sections {
    pub established: Vec<String>,
    pub emerging: Vec<String>,
    pub vocabulary: Vec<(String, String)>,
}

impl Sections {
    fn is_empty(&self) -> bool {
        self.established.is_empty() && self.emerging.is_empty() && self.vocabulary.is_empty()
    }
}

/// The deterministic extraction: lines that mention a keyword, grouped by their
/// normalised text; established when seen twice or scored ≥ 0.5, emerging otherwise.
fn fallback(keywords: &[String], playbook: &[Source], logs: &[Source]) -> Sections {
    let matches = |t: &str| keywords.iter().any(|k| modules::mentions(t, k));
    // normalised text → (first wording, count, best score)
    let mut groups: Vec<(String, String, usize, Option<f64>)> = Vec::new();
    for s in playbook.iter().chain(logs).filter(|s| matches(&s.text)) {
        let key = normalize(&s.text);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => {
                g.2 += 1;
                g.3 = match (g.3, s.score) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            None => groups.push((key, s.text.clone(), 1, s.score)),
        }
    }
    let mut sections = Sections::default();
    let mut vocabulary: Vec<(String, String)> = Vec::new();
    let strong = |g: &(String, String, usize, Option<f64>)| g.2 >= 2 || g.3.is_some_and(|s| s >= 0.5);
    let mut ordered = groups.clone();
    ordered.sort_by(|a, b| b.2.cmp(&a.2).then(b.3.unwrap_or(0.0).total_cmp(&a.3.unwrap_or(0.0))));
    for g in &ordered {
        if let Some((term, definition)) = definition_line(&g.1) {
            if !vocabulary.iter().any(|(t, _)| t.eq_ignore_ascii_case(&term)) {
                vocabulary.push((term, definition));
            }
            continue;
        }
        if strong(g) {
            sections.established.push(g.1.clone());
        } else {
            sections.emerging.push(g.1.clone());
        }
    }
    // Capitalised terms that recur across the matched lines (not sentence-initial).
    let mut seen: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for g in &groups {
        let mut counted = Vec::new();
        for (i, word) in g.1.split_whitespace().enumerate() {
            let w = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
            let capital = w.chars().next().is_some_and(char::is_uppercase) && w.chars().count() >= 3;
            let after_stop = i == 0 || g.1.split_whitespace().nth(i - 1).is_some_and(|p| p.ends_with(['.', ':', '!', '?']));
            if capital && !after_stop && !counted.contains(&w.to_string()) {
                counted.push(w.to_string());
                let e = seen.entry(w.to_string()).or_insert((0, g.1.clone()));
                e.0 += g.2;
                if g.1.len() < e.1.len() {
                    e.1 = g.1.clone();
                }
            }
        }
    }
    for (term, (count, example)) in seen {
        if count >= 2
            && !vocabulary.iter().any(|(t, _)| t.eq_ignore_ascii_case(&term))
            && !keywords.iter().any(|k| k.eq_ignore_ascii_case(&term))
        {
            vocabulary.push((term, format!("recurs in {count} lines, e.g. \"{example}\"")));
        }
    }
    sections.established.truncate(MAX_ITEMS);
    sections.emerging.truncate(MAX_ITEMS);
    vocabulary.truncate(MAX_ITEMS);
    sections.vocabulary = vocabulary;
    sections
}

/// `Term: definition` (a term of one to four capitalised words, a definition of three or more).
fn definition_line(line: &str) -> Option<(String, String)> {
    let (term, definition) = line.split_once(':')?;
    let term = term.trim().trim_matches('*').trim();
    let definition = definition.trim();
    let words = term.split_whitespace().count();
    // A name, not a clause: every word capitalised (or the term in backticks).
    let named = term.starts_with('`') && term.ends_with('`')
        || term.split_whitespace().all(|w| w.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit()));
    let ok = (1..=4).contains(&words) && definition.split_whitespace().count() >= 3 && named && !term.contains("http");
    ok.then(|| (term.to_string(), definition.to_string()))
}

/// The module's `patterns.md`.
pub fn render_patterns(name: &str, description: &str, sections: &Sections) -> String {
    let mut out = format!("# {name}\n\n");
    if !description.trim().is_empty() {
        out.push_str(&format!("{}\n\n", description.trim()));
    }
    let list = |items: &[String]| {
        if items.is_empty() { "<!-- none yet -->\n".to_string() } else { items.iter().map(|i| format!("- {i}\n")).collect() }
    };
    out.push_str(&format!("## Established\n\n{}\n", list(&sections.established)));
    out.push_str(&format!("## Emerging\n\n{}\n", list(&sections.emerging)));
    let vocabulary: Vec<String> = sections.vocabulary.iter().map(|(t, d)| format!("**{t}**: {d}")).collect();
    out.push_str(&format!("## Vocabulary\n\n{}", list(&vocabulary)));
    out
}

const SYSTEM: &str = "You extract a knowledge module for an AI agent: the patterns of one domain, from its playbook and recent logs. \
Answer with one JSON object: {\"name\": short title, \"description\": one sentence, \"keywords\": [trigger words, lower case], \
\"filePatterns\": [globs such as \"*.tsx\", may be empty], \"established\": [patterns with strong evidence: several occurrences or high scores], \
\"emerging\": [patterns seen once or twice, plausible but unconfirmed], \"vocabulary\": [{\"term\": ..., \"definition\": ...}]}. \
Each pattern is one actionable sentence. Use only what the input supports; never copy secrets.";

fn ask_model(
    engine: &Reflector,
    req: &ExtractRequest,
    keywords: &[String],
    playbook: &[Source],
    logs: &[Source],
) -> Result<(Sections, Value), String> {
    let mut input = format!("Domain: {}\nKeywords: {}\n\n## Playbook\n", req.domain, keywords.join(", "));
    for s in playbook {
        input.push_str(&format!("- {}{}\n", s.text, s.score.map(|x| format!(" (score: {x:.1})")).unwrap_or_default()));
    }
    input.push_str("\n## Logs (newest days first)\n");
    for s in logs {
        if input.len() + s.text.len() > MODEL_INPUT_CHARS {
            break;
        }
        input.push_str(&format!("- {}\n", s.text));
    }
    let answer = engine.ask(Stage::ModuleExtractor, SYSTEM, &input)?;
    let established = strings(&answer, "established", MAX_ITEMS, 300)?;
    let emerging = strings(&answer, "emerging", MAX_ITEMS, 300)?;
    let vocabulary = match answer.get("vocabulary") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .take(MAX_ITEMS)
            .map(|i| match (text(i, "term"), text(i, "definition")) {
                (Some(t), Some(d)) => Ok((t.chars().take(80).collect(), d.chars().take(300).collect())),
                _ => Err("vocabulary: each item needs a term and a definition".to_string()),
            })
            .collect::<Result<Vec<(String, String)>, String>>()?,
        Some(_) => return Err("vocabulary: not a list".into()),
    };
    let sections = Sections { established, emerging, vocabulary };
    if sections.is_empty() {
        return Err("the model's answer had no patterns".into());
    }
    Ok((sections, answer))
}

/// Extracts a module and registers it suspended (unless `dry_run`). Refused, with nothing
/// written, for a bad id, a taken id, an empty domain, a priority outside
/// [`EXTRACTED_RANGE`], a corrupt registry, or when nothing in the playbook or logs
/// concerns the domain.
pub fn extract(engine: &Reflector, settings: &WorkspaceSettings, req: &ExtractRequest, now: Timestamp) -> Result<Extracted, ExtractError> {
    modules::check_id(&req.id)?;
    if req.domain.trim().is_empty() {
        return Err(ExtractError::Invalid("--domain is empty: say what the module is about".into()));
    }
    if !settings.dir.is_dir() {
        return Err(ExtractError::Invalid(format!("no workspace at {} (run `mneme workspace init`)", settings.dir.display())));
    }
    let priority = req.priority.unwrap_or(EXTRACTED_RANGE[0]);
    if !(EXTRACTED_RANGE[0]..=EXTRACTED_RANGE[1]).contains(&priority) {
        return Err(ExtractError::Invalid(format!(
            "priority {priority} is outside the range of extracted modules [{}, {}]",
            EXTRACTED_RANGE[0], EXTRACTED_RANGE[1]
        )));
    }
    if settings.dir.join(modules::MODULES_DIR).join(&req.id).exists()
        || modules::read_registry(settings)?.is_some_and(|r| r.modules.contains_key(&req.id))
    {
        return Err(mneme_workspace::WorkspaceError::Refused(format!(
            "module {:?} already exists (modules/{}); choose another id",
            req.id, req.id
        ))
        .into());
    }
    let mut keywords: Vec<String> = req.keywords.iter().map(|k| k.trim().to_lowercase()).filter(|k| !k.is_empty()).collect();
    if keywords.is_empty() {
        keywords = domain_keywords(&req.domain);
    }
    if keywords.is_empty() {
        return Err(ExtractError::Invalid(format!("--domain {:?} has no words to match on; pass --keyword", req.domain)));
    }
    let days = req.days.unwrap_or(DEFAULT_DAYS).max(1);
    if days > MAX_DAYS {
        return Err(ExtractError::Invalid(format!("--days {days}: at most {MAX_DAYS} (ten years of logs)")));
    }
    let (playbook, logs) = gather(settings, now, days)?;
    let mut name =
        req.name.clone().unwrap_or_else(|| if req.domain.chars().count() <= 60 { title_case(&req.domain) } else { title_case(&req.id) });
    let mut description = req.domain.trim().to_string();
    let mut file_patterns = req.file_patterns.clone();
    let (sections, stage) = match ask_model(engine, req, &keywords, &playbook, &logs) {
        Ok((sections, answer)) => {
            if req.name.is_none()
                && let Some(n) = text(&answer, "name")
            {
                name = n.chars().take(80).collect();
            }
            if let Some(d) = text(&answer, "description") {
                description = d.chars().take(300).collect();
            }
            for k in strings(&answer, "keywords", 20, 40).unwrap_or_default() {
                let k = k.to_lowercase();
                if !keywords.contains(&k) {
                    keywords.push(k);
                }
            }
            if file_patterns.is_empty() {
                file_patterns = strings(&answer, "filePatterns", 20, 80).unwrap_or_default();
            }
            (sections, StageOutcome::ok())
        }
        Err(reason) => (fallback(&keywords, &playbook, &logs), StageOutcome::fallback(reason)),
    };
    if sections.is_empty() {
        return Err(ExtractError::Invalid(format!(
            "nothing in the playbook or the last {days} days of logs mentions {}: no module extracted (try --keyword or --days)",
            keywords.join(", ")
        )));
    }
    let sections = Sections {
        established: sections.established.iter().map(|s| mneme_workspace::private::strip(s).into_owned()).collect(),
        emerging: sections.emerging.iter().map(|s| mneme_workspace::private::strip(s).into_owned()).collect(),
        vocabulary: sections.vocabulary,
    };
    let manifest = Manifest {
        id: req.id.clone(),
        name: name.clone(),
        description: description.clone(),
        version: "1.0.0".into(),
        priority: PriorityRange { default: priority, range: EXTRACTED_RANGE },
        triggers: Triggers { keywords, file_patterns },
        locked: false,
    };
    let patterns = mneme_workspace::private::strip(&render_patterns(&name, &description, &sections)).into_owned();
    let path = if req.dry_run {
        None
    } else {
        Some(modules::register_new(settings, &NewModule { manifest: manifest.clone(), patterns: patterns.clone() })?.display().to_string())
    };
    Ok(Extracted {
        id: req.id.clone(),
        path,
        status: "suspended",
        established: sections.established.len(),
        emerging: sections.emerging.len(),
        vocabulary: sections.vocabulary.len(),
        manifest,
        patterns,
        stage,
        read: BTreeMap::from([("playbookPatterns", playbook.len()), ("logLines", logs.len())]),
        activate: format!("mneme module activate {}", req.id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_words_become_keywords() {
        assert_eq!(domain_keywords("React Native mobile development"), ["react", "native", "mobile"]);
        assert_eq!(domain_keywords("the react-native app"), ["react-native", "app"]);
    }

    #[test]
    fn the_fallback_sorts_by_evidence() {
        let s = |t: &str, score: Option<f64>| Source { text: t.into(), score };
        let playbook = [s("Clear the Metro cache after a native change", Some(0.7)), s("Unrelated rule about email", Some(0.9))];
        let logs = [
            s("Metro crashed: restart with --reset-cache", None),
            s("Metro crashed: restart with --reset-cache", None),
            s("Tried Expo prebuild once for the camera module", None),
            s("Hermes: the JavaScript engine React Native ships with", None),
            s("Expo Go could not load the Metro bundle", None),
        ];
        let keywords = vec!["metro".to_string(), "expo".into(), "hermes".into()];
        let out = fallback(&keywords, &playbook, &logs);
        assert_eq!(out.established, ["Metro crashed: restart with --reset-cache", "Clear the Metro cache after a native change"]);
        assert_eq!(out.emerging, ["Tried Expo prebuild once for the camera module", "Expo Go could not load the Metro bundle"]);
        assert_eq!(out.vocabulary[0], ("Hermes".to_string(), "the JavaScript engine React Native ships with".to_string()));
        assert!(!out.established.iter().chain(&out.emerging).any(|l| l.contains("email")));
    }
}
