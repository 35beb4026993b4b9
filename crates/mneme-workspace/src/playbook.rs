//! The reflection playbook (`memory/sinain-playbook.md`): what the agent has learned to do,
//! curated by the reflection heartbeat. Pure text logic here (parse, render, markers);
//! the curation itself is the agent engine's.
//!
//! The file has three parts: a header of single-line HTML comments (the mining index,
//! `<!-- mining-index: 2026-02-17,2026-02-16 -->`), the body (Markdown, at most
//! [`BODY_LIMIT`] lines after curation), and a footer of single-line comments (the
//! effectiveness, `<!-- effectiveness: outputs=8,positive=4,negative=2,neutral=2,rate=0.50 -->`).
//! Parsing then rendering gives back the same bytes; comments mneme does not know are kept
//! where they are.
//!
//! Body lines that are bullets are patterns, with optional markers: a score
//! `(score: 0.7)`, `[since: 2026-02-18]` (a fixable item first seen that day),
//! `[deferred: 2026-02-20, reason: "..."]` and `[established]` (promoted after repeated
//! success).

use jiff::civil::Date;

/// Most body lines a curated playbook keeps.
pub const BODY_LIMIT: usize = 50;

/// A playbook split into its parts, line by line (without line ends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Playbook {
    pub header: Vec<String>,
    pub body: Vec<String>,
    pub footer: Vec<String>,
    /// Whether the text ended with a line end (kept for a byte-exact round trip).
    pub trailing_newline: bool,
}

/// Whether a line belongs to a header or footer: blank, or one whole `<!-- … -->` comment.
fn is_meta(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || (t.starts_with("<!--") && t.ends_with("-->") && t.matches("<!--").count() == 1)
}

/// The value of a `<!-- KEY: value -->` comment line, if `line` is one.
fn comment_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let inner = line.trim().strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    inner.strip_prefix(key)?.strip_prefix(':').map(str::trim)
}

impl Playbook {
    /// Splits `text` into header, body and footer. Never fails: any text is a playbook.
    pub fn parse(text: &str) -> Playbook {
        let trailing_newline = text.ends_with('\n');
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let head = lines.iter().take_while(|l| is_meta(l)).count();
        let rest = &lines[head..];
        let tail = rest.iter().rev().take_while(|l| is_meta(l)).count();
        // Blank lines between the body and the footer stay with the body.
        let footer_start = rest.len() - tail;
        let mut footer: Vec<String> = rest[footer_start..].to_vec();
        let mut body: Vec<String> = rest[..footer_start].to_vec();
        while footer.first().is_some_and(|l| l.trim().is_empty()) {
            body.push(footer.remove(0));
        }
        Playbook { header: lines[..head].to_vec(), body, footer, trailing_newline }
    }

    /// The file's text again.
    pub fn render(&self) -> String {
        let mut out = self.header.iter().chain(&self.body).chain(&self.footer).cloned().collect::<Vec<_>>().join("\n");
        // A text of blank lines only ("\n") renders as it was too.
        if self.trailing_newline {
            out.push('\n');
        }
        out
    }

    /// A new playbook (the seed gives no template): the two sections curation fills.
    pub fn fresh() -> Playbook {
        Playbook::parse(
            "<!-- mining-index: -->\n# Playbook\n\n## Error prevention\n\n## Patterns\n\n\
             <!-- effectiveness: outputs=0,positive=0,negative=0,neutral=0,rate=0.00 -->\n",
        )
    }

    fn all_lines(&self) -> impl Iterator<Item = &String> {
        self.header.iter().chain(&self.body).chain(&self.footer)
    }

    /// The days whose daily files were mined, newest first (from the `mining-index`
    /// comment, wherever it is; unparsable entries are ignored).
    pub fn mining_index(&self) -> Vec<Date> {
        let mut dates: Vec<Date> = self
            .all_lines()
            .filter_map(|l| comment_value(l, "mining-index"))
            .flat_map(|v| v.split(',').filter_map(|d| d.trim().parse::<Date>().ok()).collect::<Vec<_>>())
            .collect();
        dates.sort_unstable_by(|a, b| b.cmp(a));
        dates.dedup();
        dates
    }

    /// Replaces the mining index (written in the header; an index elsewhere is removed).
    pub fn set_mining_index(&mut self, dates: &[Date]) {
        let mut dates = dates.to_vec();
        dates.sort_unstable_by(|a, b| b.cmp(a));
        dates.dedup();
        let line = format!("<!-- mining-index: {} -->", dates.iter().map(Date::to_string).collect::<Vec<_>>().join(","));
        for part in [&mut self.body, &mut self.footer] {
            part.retain(|l| comment_value(l, "mining-index").is_none());
        }
        match self.header.iter_mut().find(|l| comment_value(l, "mining-index").is_some()) {
            Some(existing) => *existing = line,
            None => self.header.insert(0, line),
        }
    }

    /// The effectiveness footer, if present and readable.
    pub fn effectiveness(&self) -> Option<Effectiveness> {
        self.all_lines().find_map(|l| comment_value(l, "effectiveness")).map(Effectiveness::parse)
    }

    /// Replaces the effectiveness footer (written last in the footer).
    pub fn set_effectiveness(&mut self, e: &Effectiveness) {
        for part in [&mut self.header, &mut self.body] {
            part.retain(|l| comment_value(l, "effectiveness").is_none());
        }
        match self.footer.iter_mut().find(|l| comment_value(l, "effectiveness").is_some()) {
            Some(existing) => *existing = e.render(),
            None => self.footer.push(e.render()),
        }
    }

    /// The body's patterns (bullet lines), with the heading each sits under.
    pub fn patterns(&self) -> Vec<(Option<String>, PatternLine)> {
        let mut heading = None;
        let mut out = Vec::new();
        for line in &self.body {
            if let Some(h) = line.trim_start().strip_prefix('#') {
                heading = Some(h.trim_start_matches('#').trim().to_string());
            } else if let Some(p) = PatternLine::parse(line) {
                out.push((heading.clone(), p));
            }
        }
        out
    }
}

/// How useful the heartbeat's outputs were over the last days (the feedback stage's
/// mechanical figures).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Effectiveness {
    pub outputs: u32,
    pub positive: u32,
    pub negative: u32,
    pub neutral: u32,
    pub rate: f64,
}

impl Effectiveness {
    /// Reads `outputs=8,positive=4,rate=0.5` (any subset of the keys; others are 0).
    pub fn parse(value: &str) -> Effectiveness {
        let mut e = Effectiveness::default();
        for pair in value.split(',') {
            let Some((k, v)) = pair.split_once('=') else { continue };
            let (k, v) = (k.trim(), v.trim());
            match k {
                "outputs" => e.outputs = v.parse().unwrap_or(0),
                "positive" => e.positive = v.parse().unwrap_or(0),
                "negative" => e.negative = v.parse().unwrap_or(0),
                "neutral" => e.neutral = v.parse().unwrap_or(0),
                "rate" => e.rate = v.parse::<f64>().ok().filter(|r| r.is_finite()).unwrap_or(0.0),
                _ => {}
            }
        }
        e
    }

    pub fn render(&self) -> String {
        format!(
            "<!-- effectiveness: outputs={},positive={},negative={},neutral={},rate={:.2} -->",
            self.outputs, self.positive, self.negative, self.neutral, self.rate
        )
    }
}

/// One pattern: a bullet line of the body, its text without markers and the markers.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternLine {
    /// The bullet (`-` or `*`) and the indentation before it.
    pub bullet: String,
    pub text: String,
    pub score: Option<f64>,
    pub since: Option<Date>,
    pub deferred: Option<(Date, String)>,
    pub established: bool,
}

/// Removes the first `open…close` span from `s`; returns its inside.
fn take_span(s: &mut String, open: &str, close: char) -> Option<String> {
    let start = s.find(open)?;
    let end = start + s[start..].find(close)?;
    let inside = s[start + open.len()..end].to_string();
    s.replace_range(start..=end, "");
    Some(inside)
}

impl PatternLine {
    /// A bullet line (`- …`, `* …`) as a pattern; `None` for other lines.
    pub fn parse(line: &str) -> Option<PatternLine> {
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start();
        let marker = rest.chars().next().filter(|c| *c == '-' || *c == '*')?;
        let body = rest[1..].strip_prefix(' ')?;
        let mut text = body.to_string();
        let score = take_span(&mut text, "(score:", ')').and_then(|v| v.trim().parse::<f64>().ok()).filter(|s| s.is_finite());
        let since = take_span(&mut text, "[since:", ']').and_then(|v| v.trim().parse::<Date>().ok());
        let deferred = take_span(&mut text, "[deferred:", ']').and_then(|v| {
            let (date, reason) = v.split_once(',')?;
            let reason = reason.trim().strip_prefix("reason:")?.trim().trim_matches('"').to_string();
            Some((date.trim().parse::<Date>().ok()?, reason))
        });
        let established = take_span(&mut text, "[established", ']').is_some();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        Some(PatternLine { bullet: format!("{}{marker}", &line[..indent]), text, score, since, deferred, established })
    }

    /// The line again, markers in a fixed order after the text.
    pub fn render(&self) -> String {
        let mut out = format!("{} {}", self.bullet, self.text);
        if let Some(s) = self.score {
            out.push_str(&format!(" (score: {s})"));
        }
        if self.established {
            out.push_str(" [established]");
        }
        if let Some(d) = self.since {
            out.push_str(&format!(" [since: {d}]"));
        }
        if let Some((d, reason)) = &self.deferred {
            out.push_str(&format!(" [deferred: {d}, reason: \"{}\"]", reason.replace('"', "'")));
        }
        out
    }

    /// The text compared case- and punctuation-insensitively: two patterns with the same
    /// key are the same pattern.
    pub fn key(&self) -> String {
        normalize(&self.text)
    }

    /// Error-prevention patterns, which curation never removes (the curator's first law):
    /// under a heading that mentions errors, or worded as a warning.
    pub fn is_protected(&self, heading: Option<&str>) -> bool {
        let warn = ["error", "avoid", "never", "don't", "do not"];
        heading.is_some_and(|h| h.to_lowercase().contains("error")) || {
            let t = self.text.to_lowercase();
            warn.iter().any(|w| t.contains(w))
        }
    }
}

/// Lower-case words of `text`, joined by single spaces (punctuation dropped).
pub fn normalize(text: &str) -> String {
    text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

/// One entry of an effective playbook's `<!-- module-stack: id(priority), … -->` line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModuleEntry {
    pub id: String,
    pub priority: i64,
}

/// The module stack named in an effective playbook's first `module-stack` comment;
/// empty when there is none. Malformed entries are skipped.
pub fn parse_module_stack(text: &str) -> Vec<ModuleEntry> {
    let Some(value) = text.lines().find_map(|l| comment_value(l, "module-stack")) else { return Vec::new() };
    value
        .split(',')
        .filter_map(|entry| {
            let entry = entry.trim();
            let (id, priority) = entry.strip_suffix(')')?.split_once('(')?;
            let id = id.trim();
            let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            valid.then(|| Some(ModuleEntry { id: id.to_string(), priority: priority.trim().parse().ok()? })).flatten()
        })
        .collect()
}

/// Writes `new` to the playbook file atomically. When its body differs from that of
/// `old` (the file's text as it was read; empty for a new file), `old` is first copied
/// verbatim to `memory/playbook-archive/sinain-playbook-YYYY-MM-DD-HHMM.md` (the time in
/// the workspace's zone; `-2`, `-3`, … when taken) so that no line curation drops is
/// lost. Metadata-only changes (mining index, effectiveness) need no copy. Returns the
/// archive's workspace-relative path when one was written.
pub fn write_curated(
    settings: &crate::WorkspaceSettings,
    old: &str,
    new: &Playbook,
    now: jiff::Timestamp,
) -> crate::WorkspaceResult<Option<std::path::PathBuf>> {
    use crate::{atomic, paths};
    atomic::ensure_dir(&settings.dir)?;
    atomic::ensure_dir(&paths::resolve(&settings.dir, paths::MEMORY_DIR)?)?;
    let mut archived = None;
    if !old.is_empty() && Playbook::parse(old).body != new.body {
        atomic::ensure_dir(&paths::resolve(&settings.dir, paths::PLAYBOOK_ARCHIVE_DIR)?)?;
        let stamp = now.to_zoned(settings.timezone.clone()).strftime("%Y-%m-%d-%H%M").to_string();
        let dir = std::path::Path::new(paths::PLAYBOOK_ARCHIVE_DIR);
        let mut relative = dir.join(format!("sinain-playbook-{stamp}.md"));
        let mut n = 2;
        while paths::resolve(&settings.dir, &relative)?.exists() {
            relative = dir.join(format!("sinain-playbook-{stamp}-{n}.md"));
            n += 1;
        }
        atomic::write_atomic(&paths::resolve(&settings.dir, &relative)?, old.as_bytes())?;
        archived = Some(relative);
    }
    atomic::write_atomic(&paths::resolve(&settings.dir, paths::PLAYBOOK)?, new.render().as_bytes())?;
    Ok(archived)
}

/// Most bytes of playbook a session-start context carries.
pub const INJECT_BUDGET: usize = 4000;

/// What [`generate_effective`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Effective {
    /// Whether the file's text changed (it is only written when it did).
    pub changed: bool,
    /// The active modules merged, highest priority first.
    pub stack: Vec<crate::modules::StackEntry>,
    /// Whether a base playbook existed.
    pub base: bool,
    /// Active modules left out, and why (no `patterns.md`).
    pub skipped: Vec<String>,
}

/// The effective playbook's text (sinain §3.4): the stack line, then each active module's
/// `patterns.md` by priority (highest first) under `<!-- module: id (priority N) -->`, then
/// `<!-- base-playbook -->` and the base playbook. Blank lines separate the parts.
pub fn render_effective(stack: &[(crate::modules::StackEntry, String)], base: &str) -> String {
    let names: Vec<String> = stack.iter().map(|(e, _)| format!("{}({})", e.id, e.priority)).collect();
    let mut out =
        if names.is_empty() { "<!-- module-stack: -->\n".to_string() } else { format!("<!-- module-stack: {} -->\n", names.join(", ")) };
    for (entry, patterns) in stack {
        out.push_str(&format!("\n<!-- module: {} (priority {}) -->\n\n", entry.id, entry.priority));
        let patterns = patterns.trim();
        if !patterns.is_empty() {
            out.push_str(patterns);
            out.push('\n');
        }
    }
    out.push_str("\n<!-- base-playbook -->\n");
    let base = base.trim_end();
    if !base.is_empty() {
        out.push('\n');
        out.push_str(base);
        out.push('\n');
    }
    out
}

/// Regenerates `memory/sinain-playbook-effective.md` from the module registry's active
/// stack and the base playbook ([`render_effective`]). Written only when its text changes,
/// and only when there is something to merge (a base playbook or an active module). A
/// corrupt registry is an error (the file is left as it was). Never takes the workspace
/// lock: module changes call it while holding it.
pub fn generate_effective(settings: &crate::WorkspaceSettings) -> crate::WorkspaceResult<Effective> {
    use crate::{atomic, modules, paths};
    if !settings.dir.is_dir() {
        return Ok(Effective::default());
    }
    let registry = modules::read_registry(settings)?.unwrap_or_default();
    let mut outcome = Effective::default();
    let mut stack = Vec::new();
    for entry in modules::stack_of(&registry) {
        match modules::read_patterns(settings, &entry.id)? {
            Some(p) => {
                outcome.stack.push(entry.clone());
                stack.push((entry, p));
            }
            None => outcome.skipped.push(format!("{}: modules/{}/patterns.md is missing", entry.id, entry.id)),
        }
    }
    let base_path = paths::resolve(&settings.dir, paths::PLAYBOOK)?;
    let base = std::fs::read_to_string(&base_path).ok();
    outcome.base = base.is_some();
    if base.is_none() && stack.is_empty() {
        return Ok(outcome);
    }
    let text = render_effective(&stack, base.as_deref().unwrap_or_default());
    atomic::ensure_dir(&paths::resolve(&settings.dir, paths::MEMORY_DIR)?)?;
    let path = paths::resolve(&settings.dir, paths::EFFECTIVE_PLAYBOOK)?;
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        atomic::write_atomic(&path, text.as_bytes())?;
        outcome.changed = true;
    }
    Ok(outcome)
}

/// One part of an effective playbook: a module's patterns (its id and priority) or the
/// base playbook (`None`), its lines without comments or the title.
struct Part<'a> {
    module: Option<(String, i64)>,
    lines: Vec<&'a str>,
}

impl Part<'_> {
    fn len(&self) -> usize {
        self.lines.iter().map(|l| l.len() + 1).sum()
    }
}

/// `<!-- module: ID (priority N) -->`: the id and priority.
fn module_marker(line: &str) -> Option<(String, i64)> {
    let inner = comment_value(line, "module")?;
    let (id, rest) = inner.split_once(" (priority ")?;
    Some((id.trim().to_string(), rest.trim_end_matches(')').trim().parse().ok()?))
}

/// The playbook as a session-start context carries it: the effective playbook (else the
/// base), without comments or its title, blank runs collapsed, at most `budget` bytes.
/// Over the budget, whole modules go first, the lowest priority first (the base playbook,
/// what the heartbeat learned about this agent and its user, goes last), each named in a
/// note; then the rest is cut at a line, with a note. `None` when there is no playbook or
/// it has no patterns.
pub fn injectable(settings: &crate::WorkspaceSettings, budget: usize) -> Option<String> {
    use crate::paths;
    if !settings.dir.is_dir() {
        return None;
    }
    let read = |p: &str| paths::resolve(&settings.dir, p).ok().and_then(|p| std::fs::read_to_string(p).ok());
    let (file, text) = match read(paths::EFFECTIVE_PLAYBOOK) {
        Some(t) => (paths::EFFECTIVE_PLAYBOOK, t),
        None => (paths::PLAYBOOK, read(paths::PLAYBOOK)?),
    };
    let mut parts: Vec<Part> = vec![Part { module: None, lines: Vec::new() }];
    for line in text.lines() {
        let t = line.trim();
        if let Some(module) = module_marker(line) {
            parts.push(Part { module: Some(module), lines: Vec::new() });
            continue;
        }
        if t == "<!-- base-playbook -->" {
            parts.push(Part { module: None, lines: Vec::new() });
            continue;
        }
        if is_meta(line) && !t.is_empty() || t == "# Playbook" {
            continue;
        }
        let lines = &mut parts.last_mut().expect("one part at least").lines;
        if t.is_empty() && lines.last().is_none_or(|l| l.trim().is_empty()) {
            continue;
        }
        lines.push(line);
    }
    for part in parts.iter_mut() {
        while part.lines.last().is_some_and(|l| l.trim().is_empty()) {
            part.lines.pop();
        }
    }
    parts.retain(|p| !p.lines.is_empty());
    if !parts.iter().flat_map(|p| &p.lines).any(|l| PatternLine::parse(l).is_some()) {
        return None;
    }
    // Whole modules out, lowest priority first (the last of equals first), while over.
    let mut left_out: Vec<String> = Vec::new();
    let total = |parts: &[Part]| parts.iter().map(|p| p.len() + 1).sum::<usize>();
    while total(&parts) > budget {
        let lowest = parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.module.as_ref().map(|(_, priority)| (*priority, std::cmp::Reverse(i), i)))
            .min()
            .map(|(.., i)| i);
        let Some(i) = lowest else { break };
        let part = parts.remove(i);
        left_out.push(part.module.map(|(id, _)| id).unwrap_or_default());
    }
    let mut out = String::new();
    'parts: for part in &parts {
        if !out.is_empty() {
            out.push('\n');
        }
        for line in &part.lines {
            if out.len() + line.len() + 1 > budget {
                out.push_str(&format!("… (the playbook continues in {file})\n"));
                break 'parts;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    if !left_out.is_empty() {
        out.push_str(&format!("… (left out for the budget, see {file}: module {})\n", left_out.join(", module ")));
    }
    Some(out.trim_end().to_string())
}
