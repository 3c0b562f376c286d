//! The hand features as they were before they were computed in one pass
//! (commit 6bffc18: a list of words, then a search per feature), kept as the
//! oracle of a property test (words are looked up, exactly or misspelt, as
//! the one-pass features look them up).

use super::{
    AI_ADDRESS, AI_FIRST_BIT, EXTRACT_BIT, FNV_OFFSET, HAND, OVERRIDE_BIT, PERSONA_BIT, PERSONA_FIRST_BIT, PERSONA_PHRASES, RULE_BIT,
    SECRET_BIT, lookup, mix,
};
use crate::normalize::Normalized;

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '-'
}

/// Dense hand features of a normalised text (each in 0..=1).
pub(super) fn hand_features(norm: &Normalized) -> [f32; HAND] {
    let t = &norm.tricks;
    let chars = &norm.chars;
    // Words (start, end, lists the word is on).
    let mut words: Vec<(usize, usize, u8)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if is_word_char(chars[i]) {
            let s = i;
            let (mut h, mut ascii) = (FNV_OFFSET, true);
            while let Some(&c) = chars.get(i).filter(|c| is_word_char(**c)) {
                h = mix(h, c as u32);
                ascii &= c.is_ascii();
                i += 1;
            }
            let bits = lookup(&chars[s..i], h, ascii);
            words.push((s, i, bits));
        } else {
            i += 1;
        }
    }
    // The phrase lists are ASCII, so a byte-by-char comparison is exact.
    let matches_at = |p: usize, s: &str| p + s.len() <= chars.len() && s.bytes().zip(&chars[p..]).all(|(b, c)| u32::from(b) == *c as u32);
    let any = |bit: u8| words.iter().any(|w| w.2 & bit != 0);
    // A word of list `a` followed within `span` words by one of list `b`.
    let near = |a: u8, b: u8, span: usize| {
        words.iter().enumerate().any(|(k, w)| w.2 & a != 0 && words.iter().skip(k + 1).take(span).any(|v| v.2 & b != 0))
    };
    // A phrase starts at a word that is its first word: the phrase matches
    // there and is not shorter than the word (the character after the word
    // is not a word character, so the phrase's first word ends there too).
    let has_phrase = |phrases: &[&str], first: u8| {
        words.iter().any(|&(s, e, bits)| bits & first != 0 && phrases.iter().any(|p| p.len() >= e - s && matches_at(s, p)))
    };
    let cap = |x: u32, k: f32| (x as f32 / k).min(1.0);
    [
        cap(t.invisible, 3.0),
        cap(t.compat, 8.0),
        cap(t.mixed_script_words, 2.0),
        super::leet_feature(t.leet_words, words.len()),
        cap(t.spaced_runs, 1.0),
        f32::from(u8::from(near(OVERRIDE_BIT, RULE_BIT, 6))),
        f32::from(u8::from(near(EXTRACT_BIT, SECRET_BIT, 5))),
        f32::from(u8::from(any(PERSONA_BIT) || has_phrase(PERSONA_PHRASES, PERSONA_FIRST_BIT))),
        f32::from(u8::from(has_phrase(AI_ADDRESS, AI_FIRST_BIT))),
    ]
}
