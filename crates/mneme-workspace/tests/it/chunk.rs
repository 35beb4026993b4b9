//! Markdown chunking: line ranges, headings, overlap, budgets and edge cases.

use mneme_workspace::chunk::{Chunk, ChunkConfig, chunk_markdown, estimate_tokens};

fn config(max_tokens: usize, overlap_tokens: usize) -> ChunkConfig {
    ChunkConfig { max_tokens, overlap_tokens }
}

/// Checks what must hold for any input: ranges are valid and in order, a chunk's text is
/// exactly its source lines (or a piece of its one line), it fits the budget unless it is a
/// piece of a split line, and every non-blank line is in some chunk.
fn check_invariants(text: &str, config: &ChunkConfig, chunks: &[Chunk]) {
    let lines: Vec<&str> = text.lines().collect();
    let mut covered = vec![false; lines.len()];
    let mut previous_start = 0;
    for chunk in chunks {
        assert!(chunk.start_line >= 1 && chunk.start_line <= chunk.end_line, "{chunk:?}");
        assert!(chunk.end_line <= lines.len(), "{chunk:?}");
        assert!(chunk.start_line >= previous_start, "chunks go forward: {chunk:?}");
        previous_start = chunk.start_line;
        let source = lines[chunk.start_line - 1..chunk.end_line].join("\n");
        if chunk.start_line == chunk.end_line && source != chunk.text {
            assert!(source.contains(&chunk.text), "a piece of line {}: {chunk:?}", chunk.start_line);
        } else {
            assert_eq!(chunk.text, source, "chunk text is its source lines");
        }
        assert!(estimate_tokens(&chunk.text) <= config.max_tokens, "over budget: {chunk:?}");
        covered[chunk.start_line - 1..chunk.end_line].iter_mut().for_each(|c| *c = true);
    }
    for (index, line) in lines.iter().enumerate() {
        assert!(covered[index] || line.trim().is_empty(), "line {} is in no chunk", index + 1);
    }
}

fn chunks(text: &str, config: &ChunkConfig) -> Vec<Chunk> {
    let chunks = chunk_markdown(text, config);
    check_invariants(text, config, &chunks);
    chunks
}

#[test]
fn empty_and_blank_texts_have_no_chunks() {
    assert!(chunks("", &ChunkConfig::default()).is_empty());
    assert!(chunks("\n\n   \n\t\n", &ChunkConfig::default()).is_empty());
}

#[test]
fn a_small_file_is_one_chunk_without_its_blank_edges() {
    let text = "\n# Decisions\n\nUse SQLite.\n\n";
    assert_eq!(
        chunks(text, &ChunkConfig::default()),
        [Chunk { start_line: 2, end_line: 4, heading: Some("Decisions".into()), text: "# Decisions\n\nUse SQLite.".into() }]
    );
}

#[test]
fn one_huge_line_is_split_into_pieces_of_that_line() {
    let words: Vec<String> = (0..3000).map(|n| format!("w{n}")).collect();
    let line = words.join(" ");
    let text = format!("# Log\n{line}\nafter");
    let result = chunks(&text, &config(100, 20));
    let pieces: Vec<&Chunk> = result.iter().filter(|c| c.start_line == 2).collect();
    assert!(pieces.len() > 1, "the line was split");
    assert!(pieces.iter().all(|c| c.end_line == 2 && c.heading.as_deref() == Some("Log")));
    let joined: String = pieces.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(joined, line, "the pieces are the line, in order, nothing lost");
    assert!(pieces[..pieces.len() - 1].iter().all(|c| c.text.ends_with(' ')), "cut at spaces");
    assert_eq!(result.last().map(|c| (c.start_line, c.text.as_str())), Some((3, "after")));

    let unbroken = "x".repeat(1000);
    let result = chunks(&unbroken, &config(10, 0));
    assert_eq!(result.len(), 26, "39 characters per piece");
}

#[test]
fn heading_paths_follow_the_outline_and_ignore_code_fences() {
    let text = "# Decisions\nintro\n## Storage\nUse SQLite.\n```\n# not a heading\n```\n## Transport\ngRPC.\n# Projects\n### Deep\nx";
    // With a budget of one token every chunk is a single line or a piece of one, so the
    // chunks show the heading path in effect at every line.
    let result = chunks(text, &config(1, 0));
    let heading_at = |line: usize| result.iter().find(|c| c.start_line == line).and_then(|c| c.heading.clone());
    assert_eq!(heading_at(1).as_deref(), Some("Decisions"));
    assert_eq!(heading_at(4).as_deref(), Some("Decisions > Storage"));
    assert_eq!(heading_at(6).as_deref(), Some("Decisions > Storage"), "fenced `#` is code");
    assert_eq!(heading_at(9).as_deref(), Some("Decisions > Transport"));
    assert_eq!(heading_at(12).as_deref(), Some("Projects > Deep"));
}

#[test]
fn consecutive_chunks_overlap_by_whole_lines_within_the_overlap_budget() {
    let text: String = (1..=120).map(|n| format!("line {n:03} has a few words in it\n")).collect();
    let per_line = estimate_tokens("line 001 has a few words in it");
    let config = config(50, 20);
    let result = chunks(&text, &config);
    assert!(result.len() > 5);
    assert_eq!(result[0].start_line, 1);
    assert_eq!(result.last().map(|c| c.end_line), Some(120));
    for pair in result.windows(2) {
        let (previous, next) = (&pair[0], &pair[1]);
        assert!(next.start_line > previous.start_line);
        assert!(next.start_line <= previous.end_line, "no gap and some overlap: {previous:?} {next:?}");
        let shared = previous.end_line - next.start_line + 1;
        assert_eq!(shared, 20 / per_line, "as many whole lines as fit in 20 tokens");
        assert!(next.end_line > previous.end_line, "every chunk brings new lines");
    }
}

#[test]
fn a_chunk_ends_before_a_heading_and_the_next_starts_at_it_without_overlap() {
    let mut text = String::from("# One\n");
    text.push_str(&"alpha beta gamma delta\n".repeat(12));
    text.push_str("# Two\n");
    text.push_str(&"epsilon zeta eta theta\n".repeat(12));
    let result = chunks(&text, &config(100, 30));
    assert_eq!(result[0].start_line, 1);
    assert_eq!(result[0].end_line, 13, "cut before `# Two`, not in the middle of it");
    assert_eq!(result[1].start_line, 14);
    assert_eq!(result[1].heading.as_deref(), Some("Two"));
}

#[test]
fn a_chunk_prefers_to_end_at_a_blank_line() {
    let mut text = String::new();
    for paragraph in 0..6 {
        for line in 0..4 {
            text.push_str(&format!("paragraph {paragraph} line {line} text\n"));
        }
        text.push('\n');
    }
    let result = chunks(&text, &config(60, 0));
    for chunk in &result[..result.len() - 1] {
        let next_line = text.lines().nth(chunk.end_line).unwrap_or_default();
        assert!(next_line.trim().is_empty(), "chunk {chunk:?} ends at a paragraph end");
    }
}

/// One generated line: prose of some length, a heading, a blank line or a fence.
fn line_strategy() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (1usize..40).prop_map(|words| vec!["word"; words].join(" ")),
        1 => (1usize..4, "[a-z]{1,8}").prop_map(|(level, title)| format!("{} {title}", "#".repeat(level))),
        2 => Just(String::new()),
        1 => Just("```".to_owned()),
        1 => (200usize..900).prop_map(|chars| "x".repeat(chars)),
    ]
}

proptest::proptest! {
    #[test]
    fn any_markdown_chunks_within_budget_covering_every_line(
        lines in proptest::collection::vec(line_strategy(), 0..120),
        max_tokens in 1usize..200,
        overlap_tokens in 0usize..120,
    ) {
        let text = lines.join("\n");
        let config = config(max_tokens, overlap_tokens);
        let result = chunks(&text, &config);
        // Progress: every chunk brings new lines, except the pieces of one split line.
        for pair in result.windows(2) {
            let (previous, next) = (&pair[0], &pair[1]);
            let pieces_of_one_line = previous.start_line == previous.end_line
                && (previous.start_line, previous.end_line) == (next.start_line, next.end_line);
            proptest::prop_assert!(
                next.end_line > previous.end_line || pieces_of_one_line,
                "no progress from {:?} to {:?}", previous, next
            );
        }
    }
}

#[test]
fn a_blank_line_inside_the_overlap_is_not_taken_as_the_next_cut() {
    // Found by the property test: the chunk after the first one preferred to end at the
    // blank line 6, which lay inside the overlap, and so repeated lines 4–5 without
    // bringing anything new.
    let words = |n: usize| vec!["word"; n].join(" ");
    let text = ["word".to_owned(), String::new(), String::new(), words(11), words(32), String::new(), "word".to_owned(), "x".repeat(221)]
        .join("\n");
    let result = chunks(&text, &config(110, 55));
    let ranges: Vec<(usize, usize)> = result.iter().map(|c| (c.start_line, c.end_line)).collect();
    assert_eq!(ranges, [(1, 5), (4, 7), (5, 8)]);
}
