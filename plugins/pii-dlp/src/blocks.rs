//! Which kinds of bytes each 64-byte block of a text holds: one pass that
//! lets the scanners skip plain prose.
//!
//! Every scanner starts a candidate only at a byte of some kind (a digit, an
//! uppercase letter, `=` or `:`, …) or needs one a few bytes later. Plain
//! prose (lowercase words, spaces, full stops, a capital per sentence) has
//! none of most kinds, so the twelve scans that each walked every byte now
//! jump over whole blocks that cannot start anything for them. A scanner
//! only skips blocks whose every position fails its own start test (the
//! block-level predicates say why, next to each scanner), so what it finds
//! and where its cursor goes are unchanged.

/// Bytes per block.
pub const BLOCK: usize = 64;

/// An ASCII digit.
pub const DIGIT: u16 = 1 << 0;
/// An ASCII uppercase letter.
pub const UPPER: u16 = 1 << 1;
/// `:`.
pub const COLON: u16 = 1 << 2;
/// `=`.
pub const EQ: u16 = 1 << 3;
/// `+` or `(` (a phone number may start with them).
pub const PLUS_PAREN: u16 = 1 << 4;
/// `A`, `_` or `-`: every known secret prefix has one in its first seven bytes.
pub const KEY_MARK: u16 = 1 << 5;
/// `/` or `+` (base64 bytes that are not alphanumeric).
pub const SLASH_PLUS: u16 = 1 << 6;
/// `J` (JWTs start with `eyJ`).
pub const J: u16 = 1 << 7;
/// `-` (PEM armour).
pub const DASH: u16 = 1 << 8;
/// `@` (emails).
pub const AT: u16 = 1 << 9;

const fn class(c: u8) -> u16 {
    let mut k = 0;
    if c.is_ascii_digit() {
        k |= DIGIT;
    }
    if c.is_ascii_uppercase() {
        k |= UPPER;
    }
    match c {
        b':' => k |= COLON,
        b'=' => k |= EQ,
        b'+' => k |= PLUS_PAREN | SLASH_PLUS,
        b'(' => k |= PLUS_PAREN,
        b'/' => k |= SLASH_PLUS,
        b'A' | b'_' => k |= KEY_MARK,
        b'-' => k |= KEY_MARK | DASH,
        b'J' => k |= J,
        b'@' => k |= AT,
        _ => {}
    }
    k
}

const CLASS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = class(c as u8);
        c += 1;
    }
    t
};

/// Every byte with a kind is in `0x28..=0x5f` ('(' to '_'); prose is
/// mostly lowercase letters and spaces (and UTF-8 bytes, >= 0x80), outside.
const LOUD: std::ops::RangeInclusive<u8> = b'('..=b'_';

const _: () = {
    // LOUD really covers every byte that has a kind.
    let mut c = 0;
    while c < 256 {
        assert!(CLASS[c] == 0 || (c >= *LOUD.start() as usize && c <= *LOUD.end() as usize));
        c += 1;
    }
};

/// OR of the kinds of `chunk`'s bytes. Eight bytes at a time: a word with
/// no byte in [`LOUD`] adds nothing and skips the eight table look-ups
/// (a SWAR range test, "hasbetween" in Bit Twiddling Hacks; bytes >= 0x80
/// never count as in range, as wanted).
fn block_class(chunk: &[u8]) -> u16 {
    const ONES: u64 = u64::MAX / 255;
    const LOW7: u64 = ONES * 127;
    const HIGH: u64 = ONES * 128;
    let (m, n) = (u64::from(*LOUD.start()) - 1, u64::from(*LOUD.end()) + 1);
    let mut k = 0;
    let mut words = chunk.chunks_exact(8);
    for w in &mut words {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let low = x & LOW7;
        let in_range = (ONES * (127 + n) - low) & !x & (low + ONES * (127 - m)) & HIGH;
        if in_range != 0 {
            k |= w.iter().fold(0, |a, &c| a | CLASS[usize::from(c)]);
        }
    }
    words.remainder().iter().fold(k, |a, &c| a | CLASS[usize::from(c)])
}

/// Kinds of bytes per block of one text.
pub struct Blocks {
    /// One entry per block, then one empty entry (so `k + 1` can always be read).
    bits: Vec<u16>,
    /// All blocks together.
    all: u16,
    /// Index of the last block holding a digit (`None`: no digit at all).
    last_digit: Option<usize>,
}

impl Blocks {
    /// Summarise `b`.
    pub fn new(b: &[u8]) -> Blocks {
        let mut bits = Vec::with_capacity(b.len() / BLOCK + 2);
        let mut all = 0;
        let mut last_digit = None;
        for chunk in b.chunks(BLOCK) {
            let k = block_class(chunk);
            if k & DIGIT != 0 {
                last_digit = Some(bits.len());
            }
            all |= k;
            bits.push(k);
        }
        bits.push(0);
        Blocks { bits, all, last_digit }
    }

    /// Kinds in block `k` (none past the end).
    pub fn at(&self, k: usize) -> u16 {
        self.bits.get(k).copied().unwrap_or(0)
    }

    /// Kinds in block `k` and the next one: what a candidate starting in
    /// block `k` can see in its first 64 bytes.
    pub fn pair(&self, k: usize) -> u16 {
        self.at(k) | self.at(k + 1)
    }

    /// Kinds anywhere in the text.
    pub fn all(&self) -> u16 {
        self.all
    }

    /// Is there a digit in block `k` or after it?
    pub fn digit_from(&self, k: usize) -> bool {
        self.last_digit.is_some_and(|d| d >= k)
    }

    /// Where a scan at `i` continues: `i` itself unless `i` starts a block
    /// that `wanted` rejects; then the start of the next block it accepts
    /// (or `end`). Called on every step, it costs one test per byte and a
    /// look-up per block.
    #[inline]
    pub fn next(&self, i: usize, end: usize, wanted: impl Fn(&Blocks, usize) -> bool) -> usize {
        if !i.is_multiple_of(BLOCK) {
            return i;
        }
        let mut k = i / BLOCK;
        while k * BLOCK < end && !wanted(self, k) {
            k += 1;
        }
        (k * BLOCK).clamp(i, end.max(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_test_is_the_table() {
        // Every byte value at every position of a word, among quiet and loud neighbours.
        for fill in [b'a', b' ', 0xc3, b'.', b'Z'] {
            for c in 0..=255u8 {
                for at in 0..11 {
                    let mut chunk = [fill; 11];
                    chunk[at] = c;
                    let table = chunk.iter().fold(0, |a, &c| a | CLASS[usize::from(c)]);
                    assert_eq!(block_class(&chunk), table, "{c:#x} at {at} among {fill:#x}");
                }
            }
        }
    }
}
