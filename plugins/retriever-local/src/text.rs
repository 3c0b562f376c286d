//! Turning text into index terms: lower-cased alphanumeric runs, English stop
//! words dropped, Snowball (Porter 2) stemming.

use std::borrow::Cow;

use rust_stemmers::{Algorithm, Stemmer};

/// Tokens longer than this (hashes, base64, minified code) are not indexed.
pub const MAX_TOKEN_BYTES: usize = 40;

/// Common English function words (the NLTK list, trimmed of contractions),
/// including question words, so "how do I …" ranks on what follows.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// True for a stop word (expects lower case).
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Lower-cased runs of letters and digits, in order (no stemming, no stop
/// words). Underscores and punctuation separate tokens, so `__init__` gives
/// `init` and `str.format` gives `str`, `format`.
pub fn raw_tokens(text: &str) -> impl Iterator<Item = Cow<'_, str>> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN_BYTES)
        .map(|t| if t.chars().any(|c| !c.is_lowercase() && c.is_alphabetic()) { Cow::Owned(t.to_lowercase()) } else { Cow::Borrowed(t) })
}

/// The analyzer used by the index and by queries.
pub struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self { stemmer: Stemmer::create(Algorithm::English) }
    }
}

impl Analyzer {
    /// Index terms of `text`, in order: stop words dropped, stemmed.
    pub fn terms<'a>(&'a self, text: &'a str) -> impl Iterator<Item = String> + 'a {
        raw_tokens(text).filter(|t| !is_stop_word(t)).map(|t| self.stemmer.stem(&t).into_owned())
    }

    /// The stem of a lower-cased token.
    pub fn stem<'a>(&self, token: &'a str) -> Cow<'a, str> {
        self.stemmer.stem(token)
    }

    /// Calls `f` with each index term of `text`, without allocating per term
    /// when the stem is a slice of the token.
    pub fn for_each_term(&self, text: &str, mut f: impl FnMut(&str)) {
        for t in raw_tokens(text) {
            if !is_stop_word(&t) {
                f(&self.stemmer.stem(&t));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stop_word("how") && is_stop_word("the") && !is_stop_word("failover"));
    }

    #[test]
    fn tokens_split_on_punctuation_and_lowercase() {
        let t: Vec<_> = raw_tokens("Use str.format() or __init__; Ünïcode-OK 42").collect();
        assert_eq!(t, ["use", "str", "format", "or", "init", "ünïcode", "ok", "42"]);
    }

    #[test]
    fn terms_are_stemmed_without_stop_words() {
        let a = Analyzer::default();
        let t: Vec<_> = a.terms("How do I configure the failover of models?").collect();
        assert_eq!(t, ["configur", "failov", "model"]);
        let t2: Vec<_> = a.terms("configured failovers").collect();
        assert_eq!(t2, ["configur", "failov"]);
    }

    #[test]
    fn huge_tokens_are_dropped() {
        let long = "x".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(raw_tokens(&format!("a {long} b")).count(), 2);
    }
}
