//! Splitting a section into passages of bounded size.
//!
//! A section that fits in `max_words` is one passage. A longer one is cut
//! into windows of at most `max_words` words; each cut goes at the last
//! paragraph break in the second half of the window, else at the last
//! sentence end there, else at the word limit. A cut that is not at a
//! paragraph break repeats the last `overlap` words at the start of the
//! next passage, so a sentence split across two passages is whole in one.
//! Passages are slices of the section text, so code keeps its line breaks.

/// Byte ranges of the passages of `text` (whitespace-separated words).
pub fn split(text: &str, max_words: usize, overlap: usize) -> Vec<(usize, usize)> {
    let max_words = max_words.max(8);
    let overlap = overlap.min(max_words / 2);
    let words = word_spans(text);
    if words.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let limit = (start + max_words).min(words.len());
        if limit == words.len() {
            out.push((words[start].0, words[limit - 1].1));
            return out;
        }
        let half = start + max_words / 2;
        // `end` is exclusive: passage = words[start..end].
        let paragraph = (half + 1..=limit).rev().find(|&e| text[words[e - 1].1..words[e].0].contains("\n\n"));
        let sentence = || (half + 1..=limit).rev().find(|&e| text[..words[e - 1].1].ends_with(['.', '!', '?', ':']));
        let (end, next) = match paragraph {
            Some(e) => (e, e),
            None => {
                let e = sentence().unwrap_or(limit);
                (e, (e - overlap).max(start + 1))
            }
        };
        out.push((words[start].0, words[end - 1].1));
        start = next;
    }
}

/// (start, end) byte offsets of the whitespace-separated words of `text`.
fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passages(text: &str, max: usize, overlap: usize) -> Vec<&str> {
        split(text, max, overlap).into_iter().map(|(a, b)| &text[a..b]).collect()
    }

    #[test]
    fn short_text_is_one_passage() {
        assert_eq!(passages("  one two\nthree  ", 10, 2), ["one two\nthree"]);
        assert!(passages("   ", 10, 2).is_empty());
    }

    #[test]
    fn cuts_prefer_paragraph_breaks_without_overlap() {
        let text = "a1 a2 a3 a4 a5 a6\n\nb1 b2 b3 b4\n\nc1 c2 c3";
        assert_eq!(passages(text, 10, 3), ["a1 a2 a3 a4 a5 a6\n\nb1 b2 b3 b4", "c1 c2 c3"]);
    }

    #[test]
    fn cuts_at_sentence_end_with_overlap() {
        let text = "w1 w2 w3 w4 w5 w6. w7 w8 w9 w10 w11 w12 w13 w14";
        assert_eq!(passages(text, 8, 2), ["w1 w2 w3 w4 w5 w6.", "w5 w6. w7 w8 w9 w10 w11 w12", "w11 w12 w13 w14"]);
    }

    #[test]
    fn every_word_is_in_some_passage_and_sizes_are_bounded() {
        let text: String = (0..1000).map(|i| format!("w{i}{}", if i % 37 == 0 { ".\n\n" } else { " " })).collect();
        let ps = passages(&text, 50, 10);
        assert!(ps.iter().all(|p| p.split_whitespace().count() <= 50));
        for i in 0..1000 {
            let w = format!("w{i}");
            assert!(ps.iter().any(|p| p.split(|c: char| !c.is_alphanumeric()).any(|x| x == w)), "{w} lost");
        }
    }
}
