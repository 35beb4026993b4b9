//! Markdown chunking for workspace search: `chunk_markdown` cuts a file into chunks of at
//! most `max_tokens` estimated tokens, by whole lines, each with its 1-based inclusive line
//! range and the heading path in effect (`Decisions > Storage`).
//!
//! Token estimate: a line costs `ceil((chars + 1) / 4)` tokens (its characters plus the
//! newline, four characters per token, the usual rule of thumb for English with BPE
//! tokenizers); a chunk costs the sum of its lines. It is deterministic, needs no
//! tokenizer, and errs high for code and low for CJK text.
//!
//! Cutting rules, in order:
//! 1. A chunk grows line by line while it fits.
//! 2. When the next line does not fit, the cut moves back to just before the last heading
//!    in the chunk, else to just after its last blank line, provided the chunk keeps at
//!    least half the budget and still holds a line the previous chunk did not. A line is never split unless it alone exceeds the budget;
//!    then it is cut into pieces (at whitespace where possible), each a chunk with that
//!    line's number as start and end, without overlap.
//! 3. The next chunk repeats the last whole lines of the previous one, up to
//!    `overlap_tokens` (at most half the budget, and never so much that the next new line
//!    would not fit). A cut before a heading starts the next chunk at the heading, without
//!    overlap: the section boundary is the context.
//! 4. Blank lines at either end of a chunk are dropped from it (and from its line range);
//!    no chunk is all blank, and every chunk holds a non-blank line that no earlier chunk
//!    holds (the pieces of one split line share theirs; property-tested).
//!
//! Headings inside fenced code blocks (``` or ~~~) are not headings.

/// Chunk size limits, in estimated tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
    /// At least 1 (0 is treated as 1).
    pub max_tokens: usize,
    /// Clamped to `max_tokens / 2`.
    pub overlap_tokens: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        Self { max_tokens: 400, overlap_tokens: 80 }
    }
}

/// One chunk of a Markdown text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Chunk {
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// The heading path in effect at the first line, outermost first, joined by ` > `.
    pub heading: Option<String>,
    /// The lines `start_line..=end_line` joined by `\n` (a piece of the line when one line
    /// was split).
    pub text: String,
}

/// The estimated token count of `text` (see the module doc): the sum over its lines.
pub fn estimate_tokens(text: &str) -> usize {
    text.lines().map(line_cost).sum()
}

/// Cuts `text` into chunks (see the module doc).
pub fn chunk_markdown(text: &str, config: &ChunkConfig) -> Vec<Chunk> {
    let max = config.max_tokens.max(1);
    let overlap = config.overlap_tokens.min(max / 2);
    let lines: Vec<&str> = text.lines().collect();
    let costs: Vec<usize> = lines.iter().map(|line| line_cost(line)).collect();
    let fenced = in_fence_flags(&lines);
    let headings = heading_paths(&lines, &fenced);
    let is_heading: Vec<bool> = lines.iter().zip(&fenced).map(|(line, &fenced)| !fenced && heading_of(line).is_some()).collect();
    let blank: Vec<bool> = lines.iter().map(|line| line.trim().is_empty()).collect();
    let cost_of = |from: usize, to: usize| costs[from..=to].iter().sum::<usize>();

    let mut chunks = Vec::new();
    // Invariant: `start` is a non-blank line (or past the end), and `fresh` is the first
    // line not in any chunk yet: a chunk must reach at least the first non-blank line from
    // `fresh` on, so every chunk brings new content.
    let mut start = next_content(&blank, 0);
    let mut fresh = start;
    while start < lines.len() {
        if costs[start] > max {
            for piece in split_line(lines[start], max) {
                chunks.push(Chunk { start_line: start + 1, end_line: start + 1, heading: headings[start].clone(), text: piece.to_owned() });
            }
            start = next_content(&blank, start + 1);
            fresh = start;
            continue;
        }

        let mut end = start;
        let mut total = costs[start];
        while end + 1 < lines.len() && total + costs[end + 1] <= max {
            end += 1;
            total += costs[end];
        }

        let mut heading_cut = false;
        if end + 1 < lines.len() {
            let half = max / 2;
            let must_reach = fresh.max(start);
            if let Some(heading) = (must_reach + 1..=end + 1).rev().find(|&line| is_heading[line] && cost_of(start, line - 1) >= half) {
                end = heading - 1;
                heading_cut = true;
            } else if let Some(gap) = (must_reach + 1..=end).rev().find(|&line| blank[line] && cost_of(start, line) >= half) {
                end = gap;
            }
        }
        push_trimmed(&mut chunks, &lines, &blank, &headings, start, end);

        let next = next_content(&blank, end + 1);
        if next >= lines.len() {
            break;
        }
        fresh = next;
        // The lines from the end of this chunk up to the next content line must fit in the
        // next chunk together with the carried overlap.
        let bridge = cost_of(end + 1, next);
        start = if heading_cut || bridge > max {
            next
        } else {
            let allowance = overlap.min(max - bridge);
            let mut first = end + 1;
            let mut carried = 0;
            while first - 1 > start && carried + costs[first - 1] <= allowance {
                first -= 1;
                carried += costs[first];
            }
            next_content(&blank, first)
        };
    }
    chunks
}

/// Pushes lines `start..=end` as a chunk, without blank lines at either end.
fn push_trimmed(chunks: &mut Vec<Chunk>, lines: &[&str], blank: &[bool], headings: &[Option<String>], start: usize, end: usize) {
    let Some(first) = (start..=end).find(|&line| !blank[line]) else { return };
    let last = (first..=end).rev().find(|&line| !blank[line]).expect("`first` is not blank");
    chunks.push(Chunk {
        start_line: first + 1,
        end_line: last + 1,
        heading: headings[first].clone(),
        text: lines[first..=last].join("\n"),
    });
}

/// The first non-blank line at or after `from`, or `blank.len()`.
fn next_content(blank: &[bool], from: usize) -> usize {
    (from..blank.len()).find(|&line| !blank[line]).unwrap_or(blank.len())
}

fn line_cost(line: &str) -> usize {
    (line.chars().count() + 1).div_ceil(4)
}

/// Cuts one over-long line into pieces that each cost at most `max` tokens, at the last
/// whitespace of a piece if that keeps it at least half full.
fn split_line(line: &str, max: usize) -> Vec<&str> {
    let max_chars = max * 4 - 1;
    let mut pieces = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let Some((limit, _)) = rest.char_indices().nth(max_chars) else {
            pieces.push(rest);
            break;
        };
        let window = &rest[..limit];
        let cut = window
            .char_indices()
            .rev()
            .find(|&(index, character)| character.is_whitespace() && index >= limit / 2)
            .map_or(limit, |(index, character)| index + character.len_utf8());
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    pieces
}

/// Whether each line is inside (or delimits) a fenced code block.
fn in_fence_flags(lines: &[&str]) -> Vec<bool> {
    let mut fence: Option<&str> = None;
    lines
        .iter()
        .map(|line| {
            let trimmed = line.trim_start();
            let marker = ["```", "~~~"].into_iter().find(|marker| trimmed.starts_with(marker));
            match (fence, marker) {
                (None, Some(marker)) => {
                    fence = Some(marker);
                    true
                }
                (Some(open), Some(marker)) if open == marker => {
                    fence = None;
                    true
                }
                (Some(_), _) => true,
                (None, None) => false,
            }
        })
        .collect()
}

/// The heading path in effect at each line (a heading line's path includes itself).
fn heading_paths(lines: &[&str], fenced: &[bool]) -> Vec<Option<String>> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut current: Option<String> = None;
    lines
        .iter()
        .zip(fenced)
        .map(|(line, &fenced)| {
            if !fenced && let Some((level, title)) = heading_of(line) {
                while stack.last().is_some_and(|(open, _)| *open >= level) {
                    stack.pop();
                }
                stack.push((level, title.to_owned()));
                let path: Vec<&str> = stack.iter().map(|(_, title)| title.as_str()).collect();
                current = Some(path.join(" > "));
            }
            current.clone()
        })
        .collect()
}

/// An ATX heading: up to three spaces, 1–6 `#`, then a space or the end of the line.
/// Returns its level and title (closing `#`s removed).
fn heading_of(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let title = after.trim().trim_end_matches('#').trim_end();
    Some((level, title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_are_recognised_like_commonmark() {
        assert_eq!(heading_of("# Title"), Some((1, "Title")));
        assert_eq!(heading_of("### Deep ###"), Some((3, "Deep")));
        assert_eq!(heading_of("   ## Indented"), Some((2, "Indented")));
        assert_eq!(heading_of("    # code"), None);
        assert_eq!(heading_of("#hashtag"), None);
        assert_eq!(heading_of("####### seven"), None);
        assert_eq!(heading_of("#"), Some((1, "")));
    }

    #[test]
    fn token_estimate_is_chars_plus_newline_over_four_rounded_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abc"), 1);
        assert_eq!(estimate_tokens("abcd"), 2);
        assert_eq!(estimate_tokens("abc\n\nabc"), 3);
    }
}
