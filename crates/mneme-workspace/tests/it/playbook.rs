//! The reflection playbook's text logic: split, round trip, markers, metadata comments.

use jiff::civil::date;
use mneme_workspace::playbook::{BODY_LIMIT, Effectiveness, PatternLine, Playbook, parse_module_stack};
use proptest::prelude::*;

const SAMPLE: &str = "<!-- mining-index: 2026-02-17,2026-02-16 -->\n\
<!-- written by a human -->\n\
# Playbook\n\
\n\
## Error prevention\n\
- Never push to main without tests (score: 0.9)\n\
- When TypeError on nullable object, suggest optional chaining (score: 0.7) [since: 2026-02-18]\n\
\n\
## Patterns\n\
* Prefer small PRs [deferred: 2026-02-20, reason: \"3 actions without resolution\"]\n\
- Summarise long threads first [established]\n\
\n\
<!-- effectiveness: outputs=8,positive=4,rate=0.5 -->\n";

#[test]
fn a_playbook_splits_into_header_body_footer_and_renders_back_byte_for_byte() {
    let p = Playbook::parse(SAMPLE);
    assert_eq!(p.header.len(), 2, "both leading comments are header");
    assert_eq!(p.body.first().map(String::as_str), Some("# Playbook"));
    assert_eq!(p.footer, ["<!-- effectiveness: outputs=8,positive=4,rate=0.5 -->"]);
    assert_eq!(p.render(), SAMPLE);
    for text in ["", "no newline at the end", "\n\n", "<!-- only a comment -->", "- a\r\n- b\r\n"] {
        let round = Playbook::parse(text).render();
        assert_eq!(round.replace('\r', ""), text.replace('\r', ""), "{text:?}");
    }
}

#[test]
fn the_mining_index_and_effectiveness_are_read_anywhere_and_written_in_their_place() {
    let mut p = Playbook::parse(SAMPLE);
    assert_eq!(p.mining_index(), [date(2026, 2, 17), date(2026, 2, 16)]);
    let e = p.effectiveness().expect("footer");
    assert_eq!((e.outputs, e.positive, e.negative, e.rate), (8, 4, 0, 0.5), "the seed's three-key form");
    p.set_mining_index(&[date(2026, 2, 16), date(2026, 2, 18), date(2026, 2, 18)]);
    assert_eq!(p.header[0], "<!-- mining-index: 2026-02-18,2026-02-16 -->");
    p.set_effectiveness(&Effectiveness { outputs: 10, positive: 7, negative: 1, neutral: 2, rate: 0.7 });
    assert_eq!(p.footer.last().map(String::as_str), Some("<!-- effectiveness: outputs=10,positive=7,negative=1,neutral=2,rate=0.70 -->"));
    assert_eq!(p.body, Playbook::parse(SAMPLE).body, "metadata changes leave the body alone");
    // An index drawn below the body (the seed's §5.6 layout) is found too, and moved up.
    let mut below = Playbook::parse("# P\n- a\n<!-- mining-index: 2026-01-02 -->\n");
    assert_eq!(below.mining_index(), [date(2026, 1, 2)]);
    below.set_mining_index(&[date(2026, 1, 3)]);
    assert_eq!(below.render(), "<!-- mining-index: 2026-01-03 -->\n# P\n- a\n");
    let fresh = Playbook::fresh();
    assert!(fresh.mining_index().is_empty());
    assert_eq!(fresh.effectiveness(), Some(Effectiveness::default()));
}

#[test]
fn pattern_lines_carry_their_markers() {
    let p = Playbook::parse(SAMPLE);
    let patterns = p.patterns();
    assert_eq!(patterns.len(), 4);
    let (heading, never) = &patterns[0];
    assert_eq!(
        (heading.as_deref(), never.text.as_str(), never.score),
        (Some("Error prevention"), "Never push to main without tests", Some(0.9))
    );
    assert!(never.is_protected(heading.as_deref()));
    let (_, fixable) = &patterns[1];
    assert_eq!((fixable.score, fixable.since), (Some(0.7), Some(date(2026, 2, 18))));
    let (heading, deferred) = &patterns[2];
    assert_eq!(deferred.deferred, Some((date(2026, 2, 20), "3 actions without resolution".to_string())));
    assert!(!deferred.is_protected(heading.as_deref()));
    assert!(patterns[3].1.established);
    // Rendering puts the markers back; parsing that gives the same pattern.
    for (_, pattern) in &patterns {
        assert_eq!(PatternLine::parse(&pattern.render()).as_ref(), Some(pattern), "{}", pattern.render());
    }
    assert_eq!(PatternLine::parse("# a heading"), None);
    assert_eq!(PatternLine::parse("-not a bullet"), None);
    assert_eq!(
        PatternLine::parse("- Use `rg`, not grep!").map(|p| p.key()),
        PatternLine::parse("* use rg not GREP").map(|p| p.key()),
        "keys ignore case and punctuation"
    );
}

#[test]
fn the_module_stack_is_read_from_the_effective_playbooks_first_line() {
    let text = "<!-- module-stack: react-native-dev(80), base-behaviors(0), bad id(3), x(y) -->\n<!-- base-playbook -->\n";
    let stack = parse_module_stack(text);
    let ids: Vec<(&str, i64)> = stack.iter().map(|m| (m.id.as_str(), m.priority)).collect();
    assert_eq!(ids, [("react-native-dev", 80), ("base-behaviors", 0)]);
    assert!(parse_module_stack("<!-- module-stack: -->").is_empty());
    assert!(parse_module_stack("# no stack").is_empty());
    assert_eq!(BODY_LIMIT, 50);
}

proptest! {
    /// Any text is a playbook, and parsing then rendering gives it back (line ends
    /// normalised to `\n`).
    #[test]
    fn any_text_round_trips(lines in proptest::collection::vec("(<!-- [a-z: ,0-9-]{0,20} -->|- [a-z ]{0,12}|#{1,2} [a-z]{1,8}|[a-z ]{0,10}|)", 0..20), newline in any::<bool>()) {
        let mut text = lines.join("\n");
        if newline && !text.is_empty() {
            text.push('\n');
        }
        prop_assert_eq!(Playbook::parse(&text).render(), text);
    }
}

mod log {
    use jiff::civil::date;
    use mneme_workspace::playbook_log::{append, log_path, read};
    use serde_json::json;

    use crate::{ts, workspace};

    #[test]
    fn lines_are_appended_per_day_and_read_back_newest_first() {
        let (_dir, settings) = workspace("UTC");
        let first = append(&settings, ts("2026-02-17T23:50:00Z"), &json!({ "kind": "tick", "tickId": "a" })).expect("append");
        append(&settings, ts("2026-02-18T00:10:00Z"), &json!({ "kind": "tick", "tickId": "b" })).expect("append");
        append(&settings, ts("2026-02-18T00:20:00Z"), &json!({ "kind": "feedback", "text": "ok <private>secret</private>" }))
            .expect("append");
        assert_eq!(first, log_path(date(2026, 2, 17)));
        let lines = read(&settings, date(2026, 2, 1), date(2026, 2, 28)).expect("read");
        let order: Vec<(&str, String)> = lines.iter().map(|l| (l.kind.as_str(), l.day.to_string())).collect();
        assert_eq!(order, [("feedback", "2026-02-18".into()), ("tick", "2026-02-18".into()), ("tick", "2026-02-17".into())]);
        assert_eq!(lines[0].value["text"], "ok", "private blocks never reach the log");
        assert_eq!(lines[1].ts, Some(ts("2026-02-18T00:10:00Z")), "ts is set when absent");
        // The window is inclusive and excludes other days.
        assert_eq!(read(&settings, date(2026, 2, 18), date(2026, 2, 18)).expect("read").len(), 2);
        // Refused: not an object, no kind. Nothing is written.
        assert!(append(&settings, ts("2026-02-18T01:00:00Z"), &json!([1])).is_err());
        assert!(append(&settings, ts("2026-02-18T01:00:00Z"), &json!({ "tickId": "c" })).is_err());
        assert_eq!(read(&settings, date(2026, 2, 18), date(2026, 2, 18)).expect("read").len(), 2);
    }

    #[test]
    fn a_line_cut_short_by_a_crash_is_skipped_and_the_next_append_stands_alone() {
        let (_dir, settings) = workspace("UTC");
        append(&settings, ts("2026-02-18T10:00:00Z"), &json!({ "kind": "tick", "tickId": "a" })).expect("append");
        let path = settings.dir.join(log_path(date(2026, 2, 18)));
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend_from_slice(br#"{"kind":"tick","tickId":"cut"#);
        std::fs::write(&path, bytes).expect("write");
        std::fs::write(settings.dir.join("memory/playbook-logs/notes.jsonl"), "{\"kind\":\"tick\"}\n").expect("write");
        append(&settings, ts("2026-02-18T10:30:00Z"), &json!({ "kind": "tick", "tickId": "b" })).expect("append");
        let ids: Vec<String> = read(&settings, date(2026, 2, 18), date(2026, 2, 18))
            .expect("read")
            .iter()
            .map(|l| l.value["tickId"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(ids, ["b", "a"], "the cut line is skipped, other file names are not logs");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.ends_with("\"tickId\":\"b\"}\n") || text.lines().last().is_some_and(|l| l.contains("\"b\"")), "{text}");
    }
}

mod injection {
    use mneme_workspace::context::session_start;
    use mneme_workspace::playbook::{INJECT_BUDGET, generate_effective, injectable};

    use crate::workspace;

    #[test]
    fn the_curated_playbook_reaches_the_session_start_context_within_its_budget() {
        let (_dir, settings) = workspace("UTC");
        assert_eq!(injectable(&settings, INJECT_BUDGET), None, "no workspace, no playbook");
        std::fs::create_dir_all(settings.dir.join("memory")).expect("memory");
        assert!(!generate_effective(&settings).expect("generate").base, "no base playbook yet");
        assert!(!settings.dir.join("memory/sinain-playbook-effective.md").exists(), "nothing to merge, nothing written");
        std::fs::write(
            settings.dir.join("memory/sinain-playbook.md"),
            "<!-- mining-index: -->\n# Playbook\n\n\n## Error prevention\n- Never deploy on Fridays\n\n## Patterns\n\n<!-- effectiveness: outputs=0 -->\n",
        )
        .expect("write");
        let generated = generate_effective(&settings).expect("generate");
        assert!(generated.base && generated.changed && generated.stack.is_empty());
        assert!(!generate_effective(&settings).expect("again").changed, "the same text is not rewritten");
        let effective = std::fs::read_to_string(settings.dir.join("memory/sinain-playbook-effective.md")).expect("effective");
        assert!(effective.starts_with("<!-- module-stack: -->\n\n<!-- base-playbook -->\n\n<!-- mining-index: -->"), "{effective}");
        let injected = injectable(&settings, INJECT_BUDGET).expect("a playbook with a pattern");
        assert_eq!(injected, "## Error prevention\n- Never deploy on Fridays\n\n## Patterns");
        let context = session_start(&settings, None).expect("context");
        assert!(context.contains("=== PLAYBOOK ===\n\n## Error prevention\n- Never deploy on Fridays"), "{context}");
        // Over the budget: cut at a line, with a pointer to the file.
        let long: String = (0..200).map(|i| format!("- pattern number {i}\n")).collect();
        std::fs::write(settings.dir.join("memory/sinain-playbook-effective.md"), format!("## Patterns\n{long}")).expect("write");
        let cut = injectable(&settings, 500).expect("cut");
        assert!(cut.len() <= 580 && cut.ends_with("(the playbook continues in memory/sinain-playbook-effective.md)"), "{cut}");
        // Over the budget with modules: whole modules go, lowest priority first, and the
        // base playbook (what was learned here) stays.
        let module = |id: &str, priority: i64, n: usize| {
            let lines: String = (0..n).map(|i| format!("- {id} rule {i} with enough words to take some room\n")).collect();
            format!("\n<!-- module: {id} (priority {priority}) -->\n\n# {id}\n{lines}")
        };
        let effective = format!(
            "<!-- module-stack: rn(80), base-behaviors(0) -->\n{}{}\n<!-- base-playbook -->\n\n# Playbook\n\n## Error prevention\n- When `npm test` fails, first run `docker compose up -d db`\n",
            module("rn", 80, 4),
            module("base-behaviors", 0, 20),
        );
        std::fs::write(settings.dir.join("memory/sinain-playbook-effective.md"), &effective).expect("write");
        let kept = injectable(&settings, 800).expect("kept");
        assert!(kept.starts_with("# rn\n- rn rule 0"), "{kept}");
        assert!(kept.contains("## Error prevention\n- When `npm test` fails, first run `docker compose up -d db`"), "{kept}");
        assert!(!kept.contains("base-behaviors rule"), "{kept}");
        assert!(kept.ends_with("… (left out for the budget, see memory/sinain-playbook-effective.md: module base-behaviors)"), "{kept}");
        assert!(kept.len() <= 900, "{}", kept.len());
        let roomy = injectable(&settings, INJECT_BUDGET).expect("all of it");
        assert!(roomy.contains("base-behaviors rule 19") && !roomy.contains("left out"), "{roomy}");
        // Headings without a single pattern are not worth a section.
        std::fs::write(settings.dir.join("memory/sinain-playbook-effective.md"), "# Playbook\n## Patterns\n").expect("write");
        assert_eq!(injectable(&settings, INJECT_BUDGET), None);
    }
}
