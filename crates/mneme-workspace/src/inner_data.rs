//! The inner life's other files: `drive.json`, `habits.json` and `relationship.json`
//! (typed, validated on read, versioned like `inner-state.json`), and the task queue
//! (`QUEUE.md`, `state.md`) as the brain loop reads it.
//!
//! Formats the seed leaves open, decided here:
//! - **`strengthRule`** (habits): `{ "reinforce": 0.1, "weaken": 0.05, "dropBelow": 0.1 }`.
//!   A habit's strength (0–1) grows by `reinforce` each time its trigger recurs and the
//!   reflect job confirms it, shrinks by `weaken` for each week it was not confirmed, and a
//!   habit below `dropBelow` is dropped. New habits start at 0.3.
//! - **`trustRules`** (relationship): `[{ "domain": "spending", "below": 0.5, "then": "ask
//!   before acting" }]`: when the domain's trust level is below `below`, the hint `then`
//!   applies. Trust levels are 0–1 per domain (technical, proactive, creative, spending).
//! - **Queue items** are Markdown task lines (`- [ ] text`, `- [x] text`), optionally with
//!   `(added YYYY-MM-DD)` or `(since YYYY-MM-DD)` and a priority `P0`–`P3` (default P2);
//!   open items sort by priority, then oldest first.

use jiff::Timestamp;
use jiff::civil::Date;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::inner::{self, DRIVE, HABITS, RELATIONSHIP, VERSION};

fn invalid(file: &str, field: &str, why: impl std::fmt::Display) -> WorkspaceError {
    WorkspaceError::Invalid(format!("{file}: {field}: {why}"))
}

fn unit(file: &str, field: &str, v: f64) -> WorkspaceResult<()> {
    if v.is_finite() && (0.0..=1.0).contains(&v) { Ok(()) } else { Err(invalid(file, field, format!("{v} is not within 0..=1"))) }
}

/// A topic the agent is exploring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Seeking {
    pub topic: String,
    #[serde(default)]
    pub since: Option<Timestamp>,
    /// 0–1 (0.5 when not given).
    #[serde(default = "half")]
    pub intensity: f64,
    /// Who started it (a job's name, `user`, `agent`).
    #[serde(default)]
    pub source: String,
    /// Free text: what has been found so far.
    #[serde(default)]
    pub progress: String,
}

fn half() -> f64 {
    0.5
}

/// Something the agent looks forward to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anticipation {
    pub what: String,
    #[serde(default)]
    pub when: Option<String>,
    #[serde(default)]
    pub note: String,
}

/// `drive.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drive {
    pub version: u32,
    #[serde(default)]
    pub seeking: Vec<Seeking>,
    #[serde(default)]
    pub anticipation: Vec<Anticipation>,
    #[serde(default)]
    pub avoidance: Vec<String>,
}

impl Default for Drive {
    fn default() -> Self {
        Drive { version: VERSION, seeking: Vec::new(), anticipation: Vec::new(), avoidance: Vec::new() }
    }
}

impl Drive {
    /// Adds `topic` to seeking (or raises its intensity to at least `intensity`); returns
    /// whether the topic is new.
    pub fn seek(&mut self, topic: &str, intensity: f64, source: &str, now: Timestamp) -> bool {
        let intensity = if intensity.is_finite() { intensity.clamp(0.0, 1.0) } else { 0.5 };
        match self.seeking.iter_mut().find(|s| s.topic.eq_ignore_ascii_case(topic)) {
            Some(s) => {
                s.intensity = s.intensity.max(intensity);
                false
            }
            None => {
                self.seeking.push(Seeking {
                    topic: topic.to_string(),
                    since: Some(now),
                    intensity,
                    source: source.to_string(),
                    progress: String::new(),
                });
                true
            }
        }
    }
}

/// One of the agent's habits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Habit {
    pub trigger: String,
    pub action: String,
    /// 0–1, moved by the strength rule.
    pub strength: f64,
    pub formed: Timestamp,
    #[serde(default)]
    pub note: String,
    /// When the reflect job last confirmed it (weekly weakening counts from here).
    #[serde(default)]
    pub confirmed: Option<Timestamp>,
}

/// A pattern observed in the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UserPattern {
    pub pattern: String,
    pub confidence: f64,
    pub observations: u32,
    pub last_seen: Timestamp,
}

/// How habits strengthen and weaken (the format the seed leaves open; see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StrengthRule {
    pub reinforce: f64,
    pub weaken: f64,
    pub drop_below: f64,
}

impl Default for StrengthRule {
    fn default() -> Self {
        StrengthRule { reinforce: 0.1, weaken: 0.05, drop_below: 0.1 }
    }
}

/// `habits.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Habits {
    pub version: u32,
    #[serde(default)]
    pub my_habits: Vec<Habit>,
    #[serde(default)]
    pub user_patterns: Vec<UserPattern>,
    #[serde(default)]
    pub strength_rule: StrengthRule,
}

impl Default for Habits {
    fn default() -> Self {
        Habits { version: VERSION, my_habits: Vec::new(), user_patterns: Vec::new(), strength_rule: StrengthRule::default() }
    }
}

/// A new habit's strength.
pub const NEW_HABIT_STRENGTH: f64 = 0.3;

impl Habits {
    /// Confirms the habit for `trigger` (strengthened by the rule) or forms it; returns
    /// its strength now.
    pub fn confirm(&mut self, trigger: &str, action: &str, note: &str, now: Timestamp) -> f64 {
        let rule = self.strength_rule;
        match self.my_habits.iter_mut().find(|h| h.trigger.eq_ignore_ascii_case(trigger)) {
            Some(h) => {
                h.strength = (h.strength + rule.reinforce).min(1.0);
                h.confirmed = Some(now);
                if !action.is_empty() {
                    h.action = action.to_string();
                }
                h.strength
            }
            None => {
                self.my_habits.push(Habit {
                    trigger: trigger.to_string(),
                    action: action.to_string(),
                    strength: NEW_HABIT_STRENGTH,
                    formed: now,
                    note: note.to_string(),
                    confirmed: Some(now),
                });
                NEW_HABIT_STRENGTH
            }
        }
    }

    /// Weakens habits by `weaken` per whole week since their last confirmation (applied
    /// from the confirmation time, so running it twice changes nothing more) and drops
    /// those below `dropBelow`; returns the triggers dropped.
    pub fn weaken(&mut self, now: Timestamp) -> Vec<String> {
        let rule = self.strength_rule;
        for h in &mut self.my_habits {
            let since = h.confirmed.unwrap_or(h.formed);
            let weeks = (now.duration_since(since).as_secs().max(0) / (7 * 86_400)) as f64;
            if weeks >= 1.0 {
                h.strength = (h.strength - rule.weaken * weeks).max(0.0);
                h.confirmed = Some(since + jiff::SignedDuration::from_hours(24 * 7 * weeks as i64));
            }
        }
        // (Within rounding: 0.3 − 4 × 0.05 is at the threshold, not below it.)
        let below = |h: &Habit| h.strength < rule.drop_below - 1e-9;
        let dropped = self.my_habits.iter().filter(|h| below(h)).map(|h| h.trigger.clone()).collect();
        self.my_habits.retain(|h| !below(h));
        dropped
    }
}

/// A trust rule: below `below` in `domain`, `then` applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRule {
    pub domain: String,
    pub below: f64,
    pub then: String,
}

/// Trust per domain, 0–1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustLevel {
    pub technical: f64,
    pub proactive: f64,
    pub creative: f64,
    pub spending: f64,
}

impl Default for TrustLevel {
    fn default() -> Self {
        TrustLevel { technical: 0.5, proactive: 0.5, creative: 0.5, spending: 0.2 }
    }
}

impl TrustLevel {
    fn get(&self, domain: &str) -> Option<f64> {
        match domain {
            "technical" => Some(self.technical),
            "proactive" => Some(self.proactive),
            "creative" => Some(self.creative),
            "spending" => Some(self.spending),
            _ => None,
        }
    }
}

/// `relationship.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Relationship {
    pub version: u32,
    #[serde(default)]
    pub trust_level: TrustLevel,
    #[serde(default)]
    pub trust_rules: Vec<TrustRule>,
    #[serde(default)]
    pub lessons_learned: Vec<String>,
    #[serde(default)]
    pub topics_that_excite: Vec<String>,
    #[serde(default)]
    pub topics_that_bore: Vec<String>,
}

impl Relationship {
    /// The `then` of every rule whose domain's trust is below its threshold.
    pub fn active_rules(&self) -> Vec<String> {
        self.trust_rules
            .iter()
            .filter(|r| self.trust_level.get(&r.domain).is_some_and(|t| t < r.below))
            .map(|r| format!("{} (trust {:.2} < {:.2}): {}", r.domain, self.trust_level.get(&r.domain).unwrap_or(0.0), r.below, r.then))
            .collect()
    }
}

fn read_typed<T: DeserializeOwned>(settings: &WorkspaceSettings, file: &str) -> WorkspaceResult<Option<T>> {
    let Some(value) = inner::read_json(settings, file)? else { return Ok(None) };
    inner::check_version(file, &value)?;
    serde_json::from_value(value).map(Some).map_err(|e| invalid(file, "format", e))
}

/// Reads and validates `drive.json`.
pub fn read_drive(settings: &WorkspaceSettings) -> WorkspaceResult<Option<Drive>> {
    let drive: Option<Drive> = read_typed(settings, DRIVE)?;
    if let Some(d) = &drive {
        for (i, s) in d.seeking.iter().enumerate() {
            unit(DRIVE, &format!("seeking[{i}].intensity"), s.intensity)?;
            if s.topic.trim().is_empty() {
                return Err(invalid(DRIVE, &format!("seeking[{i}].topic"), "empty"));
            }
        }
    }
    Ok(drive)
}

/// Reads and validates `habits.json`.
pub fn read_habits(settings: &WorkspaceSettings) -> WorkspaceResult<Option<Habits>> {
    let habits: Option<Habits> = read_typed(settings, HABITS)?;
    if let Some(h) = &habits {
        for (i, habit) in h.my_habits.iter().enumerate() {
            unit(HABITS, &format!("myHabits[{i}].strength"), habit.strength)?;
        }
        for (i, p) in h.user_patterns.iter().enumerate() {
            unit(HABITS, &format!("userPatterns[{i}].confidence"), p.confidence)?;
        }
        let r = h.strength_rule;
        for (field, v) in [("reinforce", r.reinforce), ("weaken", r.weaken), ("dropBelow", r.drop_below)] {
            unit(HABITS, &format!("strengthRule.{field}"), v)?;
        }
    }
    Ok(habits)
}

/// Reads and validates `relationship.json`.
pub fn read_relationship(settings: &WorkspaceSettings) -> WorkspaceResult<Option<Relationship>> {
    let rel: Option<Relationship> = read_typed(settings, RELATIONSHIP)?;
    if let Some(r) = &rel {
        let t = &r.trust_level;
        for (field, v) in [("technical", t.technical), ("proactive", t.proactive), ("creative", t.creative), ("spending", t.spending)] {
            unit(RELATIONSHIP, &format!("trustLevel.{field}"), v)?;
        }
        for (i, rule) in r.trust_rules.iter().enumerate() {
            if t.get(&rule.domain).is_none() {
                return Err(invalid(
                    RELATIONSHIP,
                    &format!("trustRules[{i}].domain"),
                    format!("{:?} is not technical, proactive, creative or spending", rule.domain),
                ));
            }
            unit(RELATIONSHIP, &format!("trustRules[{i}].below"), rule.below)?;
        }
    }
    Ok(rel)
}

/// Pretty JSON with a trailing newline, as the files are written.
pub fn to_file_text<T: Serialize>(file: &str, value: &T) -> WorkspaceResult<String> {
    serde_json::to_string_pretty(value).map(|t| t + "\n").map_err(|e| invalid(file, "format", e))
}

/// One task line of `QUEUE.md` or `state.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueItem {
    /// The text without the checkbox, date and priority markers.
    pub text: String,
    pub done: bool,
    /// From `(added YYYY-MM-DD)` / `(since YYYY-MM-DD)`.
    pub since: Option<Date>,
    /// 0 (most urgent) … 3; default 2.
    pub priority: u8,
    /// 1-based line number.
    pub line: usize,
}

/// The task lines of a Markdown file.
pub fn parse_queue(text: &str) -> Vec<QueueItem> {
    let mut items = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        let Some(rest) = line.strip_prefix("- [").or_else(|| line.strip_prefix("* [")) else { continue };
        let (done, rest) = match rest.get(..2) {
            Some(" ]") => (false, &rest[2..]),
            Some("x]" | "X]") => (true, &rest[2..]),
            _ => continue,
        };
        let mut text = rest.trim().to_string();
        let mut since = None;
        for key in ["(added ", "(since "] {
            if let Some(start) = text.find(key)
                && let Some(len) = text[start..].find(')')
            {
                since = text[start + key.len()..start + len].trim().parse::<Date>().ok().or(since);
                text.replace_range(start..start + len + 1, "");
            }
        }
        let mut priority = 2;
        let words: Vec<&str> = text.split_whitespace().collect();
        let kept: Vec<&str> = words
            .iter()
            .filter(|w| match w.trim_matches(|c| c == '[' || c == ']').to_ascii_uppercase().as_str() {
                p @ ("P0" | "P1" | "P2" | "P3") => {
                    priority = p.as_bytes()[1] - b'0';
                    false
                }
                _ => true,
            })
            .copied()
            .collect();
        text = kept.join(" ");
        if !text.is_empty() {
            items.push(QueueItem { text, done, since, priority, line: n + 1 });
        }
    }
    items
}

/// Open items, most urgent first: by priority, then oldest, then file order.
pub fn prioritize(items: &[QueueItem]) -> Vec<QueueItem> {
    let mut open: Vec<QueueItem> = items.iter().filter(|i| !i.done).cloned().collect();
    open.sort_by(|a, b| {
        a.priority.cmp(&b.priority).then_with(|| match (a.since, b.since) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.line.cmp(&b.line),
        })
    });
    open
}
