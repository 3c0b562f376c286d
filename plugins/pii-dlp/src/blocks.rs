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
            let k = chunk.iter().fold(0, |a, &c| a | CLASS[usize::from(c)]);
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
