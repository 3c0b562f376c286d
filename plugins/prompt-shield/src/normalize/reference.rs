//! The normaliser as it was before its passes were tuned for speed (commit
//! 6bffc18: a list of words for steps 4-5, a table of alphanumerics for
//! steps 6-7, no ASCII path), kept as the oracle of a property test: on
//! random text the tuned normaliser must give exactly what this one gives.

use super::{Normalized, Tricks, fold_compat, is_invisible, leet, leet_word_char, lookalike};

/// Normalise `text`. Linear in the input length.
pub(super) fn normalize(text: &str) -> Normalized {
    let mut tricks = Tricks::default();
    // Steps 1-3.
    let mut base: Vec<char> = Vec::with_capacity(text.len());
    for c in text.chars() {
        // Invisible and compatibility characters are all outside ASCII.
        if c.is_ascii() {
            base.push(c.to_ascii_lowercase());
            continue;
        }
        if is_invisible(c) {
            tricks.invisible += 1;
            continue;
        }
        let c = fold_compat(c, &mut tricks);
        if c.is_ascii() {
            base.push(c.to_ascii_lowercase());
        } else {
            base.extend(c.to_lowercase());
        }
    }
    fold_words(&mut base, &mut tricks);
    join_and_squeeze(&mut base, &mut tricks);
    Normalized { chars: base, tricks }
}

/// Script make-up of one word (step 4).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Latin letters (and digits) only.
    Latin,
    /// Latin letters mixed with lookalikes.
    Mixed,
    /// Only lookalike letters (may be a genuine Cyrillic/Greek word).
    Lookalike,
    /// Anything else (other scripts, numbers).
    Other,
}

/// Steps 4 and 5, word by word. An all-lookalike word is folded only next to
/// a Latin or mixed word, so "привет мир" stays Russian.
fn fold_words(chars: &mut [char], tricks: &mut Tricks) {
    let mut words: Vec<(usize, usize, Script, usize)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !leet_word_char(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        // Letters by script, counted as the word is scanned. The trailing
        // '!' / '+' / '|' trimmed below are ASCII non-letters: they count in
        // none of these, so counting them here changes nothing.
        let (mut latin, mut looks, mut other) = (0, 0, 0);
        while let Some(&c) = chars.get(i).filter(|c| leet_word_char(**c)) {
            if c.is_ascii_alphabetic() {
                latin += 1;
            } else if c.is_ascii() {
                // digits and leet symbols
            } else if lookalike(c).is_some() {
                looks += 1;
            } else if c.is_alphabetic() {
                other += 1;
            }
            i += 1;
        }
        // Trailing '!' / '+' are punctuation, not leet.
        let mut end = i;
        while end > start && matches!(chars[end - 1], '!' | '+' | '|') {
            end -= 1;
        }
        let script = match (latin > 0, looks > 0, other > 0) {
            (true, true, _) => Script::Mixed,
            (true, false, false) => Script::Latin,
            (false, true, false) => Script::Lookalike,
            _ => Script::Other,
        };
        // Letters (any script) and leet-able non-letters, for step 5.
        let leetable = end - start - latin - looks - other;
        words.push((start, end, script, leetable));
        continue;
    }
    for k in 0..words.len() {
        let (start, end, script, leetable) = words[k];
        let latin_near = |j: Option<usize>| j.and_then(|j| words.get(j)).is_some_and(|w| matches!(w.2, Script::Latin | Script::Mixed));
        let fold = script == Script::Mixed || (script == Script::Lookalike && (latin_near(k.checked_sub(1)) || latin_near(Some(k + 1))));
        let word = &mut chars[start..end];
        if fold {
            tricks.mixed_script_words += 1;
            for c in word.iter_mut() {
                if let Some(l) = lookalike(*c) {
                    *c = l;
                }
            }
        }
        // Leet only where letters dominate and it is not a number or an id.
        let digits = leetable;
        let letters = word.len() - digits;
        let foreign = script == Script::Other || (script == Script::Lookalike && !fold);
        if digits > 0 && letters >= 2 && letters >= digits && word.len() >= 3 && !foreign {
            tricks.leet_words += 1;
            for c in word.iter_mut() {
                if let Some(l) = leet(*c) {
                    *c = l;
                }
            }
        }
    }
}

fn is_spacer(c: char) -> bool {
    matches!(c, ' ' | '.' | '-' | '_' | '*' | '/' | '\\' | '~' | '·')
}

/// Step 7 as a writer: keeps what it is given unless it repeats, writing
/// over the front of the buffer being read (it never overtakes the reader).
struct Squeezer {
    w: usize,
    /// The last two characters kept (meaningful once `w` reaches 1 and 2).
    last: char,
    before: char,
}

impl Squeezer {
    fn push(&mut self, out: &mut [char], c: char) {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' && (self.w == 0 || self.last == ' ') {
            return;
        }
        // A repeated non-alphanumeric, or a third repeated letter.
        if self.w >= 1 && self.last == c && (!c.is_alphanumeric() || (self.w >= 2 && self.before == c)) {
            return;
        }
        out[self.w] = c;
        self.w += 1;
        (self.before, self.last) = (self.last, c);
    }

    /// The kept length, without a trailing space.
    fn finish(self) -> usize {
        if self.w > 0 && self.last == ' ' { self.w - 1 } else { self.w }
    }
}

/// Steps 6 and 7 in one pass, in place. Step 6: "i g n o r e" -> "ignore";
/// a run needs at least four letters. Step 7 squeezes what step 6 keeps.
/// The output never outgrows the input, and every read sees an original
/// character: the writer is never ahead of the reader.
fn join_and_squeeze(chars: &mut Vec<char>, tricks: &mut Tricks) {
    let n = chars.len();
    let alnum: Vec<bool> = chars.iter().map(|c| c.is_alphanumeric()).collect();
    let single = |k: usize| alnum[k] && (k == 0 || !alnum[k - 1]) && (k + 1 >= n || !alnum[k + 1]);
    let mut out = Squeezer { w: 0, last: '\0', before: '\0' };
    let mut i = 0;
    while i < n {
        if single(i) {
            // Letter, spacer, letter, spacer, ... with one spacer each.
            let mut k = i;
            while k + 2 < n && is_spacer(chars[k + 1]) && single(k + 2) {
                k += 2;
            }
            if (k - i) / 2 + 1 >= 4 {
                tricks.spaced_runs += 1;
                for r in (i..=k).step_by(2) {
                    let c = chars[r];
                    out.push(chars, c);
                }
                i = k + 1;
                continue;
            }
        }
        let c = chars[i];
        out.push(chars, c);
        i += 1;
    }
    let len = out.finish();
    chars.truncate(len);
}
