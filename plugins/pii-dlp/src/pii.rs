//! Personal-data scanners, hand-written for speed (one pass each, no regex
//! compilation per instance): emails, phone numbers, payment cards (Luhn +
//! issuer), IBANs (mod 97), IPv4/IPv6, US SSN, Canadian SIN (Luhn, with
//! context), Spanish DNI/NIE (control letter), UK NINO (prefix rules).

use crate::blocks::{AT, Blocks, COLON, DIGIT, PLUS_PAREN, UPPER};
use std::cell::Cell;

use crate::checks;
use crate::finding::{Class, Finding};

fn alnum(b: Option<&u8>) -> bool {
    b.is_some_and(|c| c.is_ascii_alphanumeric())
}

/// Is one of `words` (lowercase, whole word at its start) in the `span`
/// bytes before `at`?
pub fn context_before(text: &str, at: usize, span: usize, words: &[&str]) -> bool {
    let mut from = at.saturating_sub(span);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let window = &text.as_bytes()[from..at];
    if !window.is_ascii() {
        return context_before_unicode(&text[from..at], words);
    }
    // ASCII window (the usual case): lowercasing maps byte to byte, so the
    // words are matched in place, without the lowercased copy. No word
    // overlaps itself (a unit test checks it), so `match_indices`' leftmost
    // non-overlapping matches below are all the matches, and one walk over
    // the window's word starts tries every word; every word starts with an
    // ASCII letter (checked too), so only letters after a non-letter can
    // start a match.
    for p in 0..window.len() {
        if !window[p].is_ascii_alphabetic() || (p > 0 && window[p - 1].is_ascii_alphabetic()) {
            continue;
        }
        let rest = &window[p..];
        let first = window[p].to_ascii_lowercase();
        for w in words {
            let w = w.as_bytes();
            if w[0] == first && rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w) {
                let end = p + w.len();
                // Short words must end there too ("sin" is not "since").
                if w.len() > 4 || end >= window.len() || !window[end].is_ascii_alphabetic() {
                    return true;
                }
            }
        }
    }
    false
}

/// [`context_before`] on a window with non-ASCII text: Unicode lowercase
/// (which may change lengths, and maps a few non-ASCII letters such as
/// U+212A KELVIN SIGN to ASCII ones).
fn context_before_unicode(window: &str, words: &[&str]) -> bool {
    let before = window.to_lowercase();
    let bytes = before.as_bytes();
    words.iter().any(|w| {
        before.match_indices(w).any(|(p, _)| {
            let start_ok = p == 0 || !bytes[p - 1].is_ascii_alphabetic();
            let end = p + w.len();
            // Short words must end there too ("sin" is not "since").
            let end_ok = w.len() > 4 || end >= bytes.len() || !bytes[end].is_ascii_alphabetic();
            start_ok && end_ok
        })
    })
}

/// All personal-data findings in `text`.
pub fn scan(text: &str, out: &mut Vec<Finding>) {
    scan_in(text, &Blocks::new(text.as_bytes()), out);
}

/// [`scan`] with the text's block summary already made.
pub fn scan_in(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    if blocks.all() & AT != 0 {
        emails(text, out);
    }
    numbers(text, blocks, out);
    ibans(text, blocks, out);
    if blocks.all() & COLON != 0 {
        ipv6(text, out);
    }
    national_ids(text, blocks, out);
}

fn emails(text: &str, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    let local = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-');
    let domain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-');
    let mut last_end = 0;
    for (at, _) in text.match_indices('@') {
        if at < last_end {
            continue;
        }
        let mut s = at;
        while s > 0 && local(b[s - 1]) {
            s -= 1;
        }
        while s < at && b[s] == b'.' {
            s += 1;
        }
        let mut e = at + 1;
        while e < b.len() && domain(b[e]) {
            e += 1;
        }
        while e > at + 1 && matches!(b[e - 1], b'.' | b'-') {
            e -= 1;
        }
        let dom = &text[at + 1..e];
        let tld = dom.rsplit('.').next().unwrap_or("");
        let labels_ok = dom.split('.').all(|l| !l.is_empty() && !l.starts_with('-'));
        if s < at && dom.contains('.') && labels_ok && tld.len() >= 2 && tld.bytes().all(|c| c.is_ascii_alphabetic()) {
            out.push(Finding::new(s, e, "email", Class::Pii, 0.9));
            last_end = e;
        }
    }
}

/// Most digit groups in one run.
const MAX_GROUPS: usize = 12;

/// A run of digit groups separated by short separators ("+1 (555) 123-4567").
/// Fixed-size: a run is scanned at every digit of the text, and a `Vec` per
/// run was one allocation each.
struct Run {
    plus: bool,
    /// (start, end) byte offsets of each digit group; the first `len` are set.
    groups: [(usize, usize); MAX_GROUPS],
    len: usize,
}

const PHONE_WORDS: &[&str] =
    &["phone", "tel", "mobile", "cell", "call", "fax", "whatsapp", "telefon", "téléphone", "teléfono", "handy", "contact"];

fn numbers(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    // A run starts at a digit, '+' or '(': blocks without one are skipped.
    let wanted = |bl: &Blocks, k| bl.at(k) & (DIGIT | PLUS_PAREN) != 0;
    let mut i = blocks.next(0, b.len(), wanted);
    while i < b.len() {
        let starts = b[i].is_ascii_digit() || (matches!(b[i], b'+' | b'(') && b.get(i + 1).is_some_and(u8::is_ascii_digit));
        if !starts || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'.' | b'-' | b'_' | b'/' | b':'))) {
            i = blocks.next(i + 1, b.len(), wanted);
            continue;
        }
        let plus = b[i] == b'+';
        let mut j = if matches!(b[i], b'+' | b'(') { i + 1 } else { i };
        let mut run = Run { plus, groups: [(0, 0); MAX_GROUPS], len: 0 };
        loop {
            let gs = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            run.groups[run.len] = (gs, j);
            run.len += 1;
            // Up to two separator bytes: ' ', '-', '.', '(', ')' (not two spaces).
            let mut k = j;
            while k < b.len()
                && k - j < 2
                && matches!(b[k], b' ' | b'-' | b'.' | b'(' | b')')
                && !(b[k] == b' ' && k > j && b[k - 1] == b' ')
            {
                k += 1;
            }
            if k > j && k < b.len() && b[k].is_ascii_digit() && run.len < MAX_GROUPS {
                j = k;
            } else {
                break;
            }
        }
        let end = classify(text, i, &run, out);
        i = end.max(i + 1);
    }
}

/// Classify contiguous group ranges of a run, longest first; returns where
/// scanning continues.
/// Context look-ups for one start of a span, each done at most once: the
/// group ranges of a run that share a start share their context, and a run
/// of many groups asked the same question up to twelve times.
struct Context<'a> {
    text: &'a str,
    start: usize,
    ssn: Cell<Option<bool>>,
    sin: Cell<Option<bool>>,
    phone: Cell<Option<bool>>,
}

impl Context<'_> {
    fn memo(cell: &Cell<Option<bool>>, f: impl FnOnce() -> bool) -> bool {
        let v = cell.get().unwrap_or_else(f);
        cell.set(Some(v));
        v
    }
    fn ssn(&self) -> bool {
        Self::memo(&self.ssn, || context_before(self.text, self.start, 40, SSN_WORDS))
    }
    fn sin(&self) -> bool {
        Self::memo(&self.sin, || context_before(self.text, self.start, 40, SIN_WORDS))
    }
    fn phone(&self) -> bool {
        Self::memo(&self.phone, || context_before(self.text, self.start, 30, PHONE_WORDS))
    }
}

const SSN_WORDS: &[&str] = &["ssn", "social security"];
const SIN_WORDS: &[&str] = &["sin", "social insurance", "nas"];

fn classify(text: &str, run_start: usize, run: &Run, out: &mut Vec<Finding>) -> usize {
    let g = &run.groups[..run.len];
    let run_end = g.last().map_or(run_start, |x| x.1);
    let mut i = 0;
    let mut resume = run_start;
    while i < g.len() {
        let mut matched = false;
        let start = if i == 0 && run.plus { run_start } else { g[i].0 };
        let start = if i == 0 && text.as_bytes()[run_start] == b'(' { run_start } else { start };
        let ctx = Context { text, start, ssn: Cell::new(None), sin: Cell::new(None), phone: Cell::new(None) };
        for j in (i..g.len()).rev() {
            let end = g[j].1;
            if let Some(kind) = kind_of(&ctx, &g[i..=j], i == 0 && run.plus, i == 0 && j + 1 == g.len()) {
                // The span must not be glued to letters or more digits.
                let after = text.as_bytes().get(end);
                if !alnum(after) {
                    out.push(Finding::new(start, end, kind.0, Class::Pii, kind.1));
                    resume = end;
                    i = j + 1;
                    matched = true;
                    break;
                }
            }
        }
        if !matched {
            i += 1;
        }
    }
    resume.max(run_end)
}

fn kind_of(ctx: &Context, groups: &[(usize, usize)], plus: bool, whole: bool) -> Option<(&'static str, f32)> {
    let (text, start) = (ctx.text, ctx.start);
    let b = text.as_bytes();
    // Called for every contiguous range of groups of every digit run: the
    // digits, separators and group lengths are looked at in place (no `Vec`s).
    let mut lens_buf = [0usize; MAX_GROUPS];
    for (l, &(s, e)) in lens_buf.iter_mut().zip(groups) {
        *l = e - s;
    }
    let lens = &lens_buf[..groups.len()];
    let n: usize = lens.iter().sum();
    // Every shape below has at most 19 digits (cards); longer runs are nothing.
    if n > 19 {
        return None;
    }
    let mut digits_buf = [0u8; 19];
    let mut k = 0;
    for &(s, e) in groups {
        digits_buf[k..k + e - s].copy_from_slice(&b[s..e]);
        k += e - s;
    }
    let digits = &digits_buf[..n];
    let seps = || groups.windows(2).map(|w| &b[w[0].1..w[1].0]);
    let all_sep = |s: &[u8]| seps().all(|x| x == s);
    // IPv4: four dotted octets.
    if groups.len() == 4 && all_sep(b".") && !plus && lens.iter().all(|&l| (1..=3).contains(&l)) {
        let ok = groups.iter().all(|&(s, e)| text[s..e].parse::<u16>().is_ok_and(|v| v <= 255));
        return ok.then_some(("ip_address", 0.6));
    }
    if seps().any(|s| s.contains(&b'.')) && !all_sep(b".") {
        return None;
    }
    // Cards: one group, or groups joined by one kind of separator.
    if !plus && (13..=19).contains(&n) && (groups.len() == 1 || all_sep(b" ") || all_sep(b"-")) && checks::card(digits) {
        return Some(("card_number", 0.95));
    }
    // US SSN: 3-2-4 with '-' (or ' ' after an SSN word), or 9 digits after an SSN word.
    // Context look-ups cost a window scan; only shapes that need one ask for it.
    let ssn_ctx = || ctx.ssn();
    if !plus && lens == [3, 2, 4] && (all_sep(b"-") || (all_sep(b" ") && ssn_ctx())) {
        let (a, g2, s) = (&digits[..3], &digits[3..5], &digits[5..]);
        if checks::us_ssn(a, g2, s) {
            return Some(("us_ssn", 0.85));
        }
    }
    if !plus && lens == [9] && ssn_ctx() && checks::us_ssn(&digits[..3], &digits[3..5], &digits[5..]) {
        return Some(("us_ssn", 0.8));
    }
    // Canadian SIN: 3-3-3, Luhn, with a SIN word nearby.
    if !plus && (lens == [3, 3, 3] || lens == [9]) && checks::luhn(digits) && ctx.sin() {
        return Some(("ca_sin", 0.85));
    }
    // Phones.
    if plus && (8..=15).contains(&n) && (groups.len() >= 2 || n >= 10) {
        return Some(("phone", 0.8));
    }
    let nanp = |l: &[usize], d: &[u8]| l == [3, 3, 4] && d[0] >= b'2' && d[3] >= b'2';
    if !plus && whole && (nanp(lens, digits) || (lens.first() == Some(&1) && digits[0] == b'1' && nanp(&lens[1..], &digits[1..]))) {
        let paren = b.get(start) == Some(&b'(');
        if paren || all_sep(b"-") || all_sep(b".") || all_sep(b" ") || seps().any(|s| s.contains(&b')')) {
            return Some(("phone", 0.75));
        }
    }
    if !plus && whole && digits[0] == b'0' && (9..=11).contains(&n) && groups.len() >= 2 && lens.iter().all(|&l| l >= 2) {
        return Some(("phone", 0.7));
    }
    if (7..=15).contains(&n) && ctx.phone() {
        return Some(("phone", 0.7));
    }
    None
}

fn ibans(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    // A head is an uppercase letter with a digit two bytes on (in the same
    // block or the next): other blocks are skipped.
    let wanted = |bl: &Blocks, k| bl.at(k) & UPPER != 0 && bl.pair(k) & DIGIT != 0;
    let mut i = blocks.next(0, b.len(), wanted);
    while i + 4 <= b.len() {
        let head = b[i].is_ascii_uppercase() && b[i + 1].is_ascii_uppercase() && b[i + 2].is_ascii_digit() && b[i + 3].is_ascii_digit();
        if !head || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            i = blocks.next(i + 1, b.len(), wanted);
            continue;
        }
        let Some(want) = checks::iban_expected_len(&b[i..i + 2]) else {
            i = blocks.next(i + 1, b.len(), wanted);
            continue;
        };
        let mut compact = Vec::with_capacity(want);
        let mut j = i;
        while j < b.len() && compact.len() < want {
            if b[j].is_ascii_digit() || b[j].is_ascii_uppercase() {
                compact.push(b[j]);
            } else if !(b[j] == b' ' && j + 1 < b.len() && b[j + 1].is_ascii_alphanumeric() && j > i) {
                break;
            }
            j += 1;
        }
        if compact.len() == want && !alnum(b.get(j)) && checks::iban_mod97(&compact) {
            out.push(Finding::new(i, j, "iban", Class::Pii, 0.95));
            i = j;
        } else {
            i = blocks.next(i + 1, b.len(), wanted);
        }
    }
}

/// IPv6 addresses, found from their colons.
///
/// The byte-by-byte form of this scan (kept in the tests as the reference)
/// takes, in each maximal run of hex digits, ':' and '.', at most one
/// candidate: from the run's first byte if no letter or digit is glued
/// before it, else from the first byte after a '.' inside the run, to the
/// run's end. A candidate needs two colons, so only runs that hold a colon
/// are looked at, and the scan jumps from colon to colon (`memchr`).
fn ipv6(text: &str, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    let cand = |c: u8| c.is_ascii_hexdigit() || c == b':' || c == b'.';
    let mut from = 0;
    while let Some(c) = text[from..].find(':').map(|p| from + p) {
        // The maximal run holding this colon; runs never overlap, and the
        // previous one ended on a byte that is not in a run (before `from`).
        let mut r0 = c;
        while r0 > 0 && cand(b[r0 - 1]) {
            r0 -= 1;
        }
        let mut j = c + 1;
        while j < b.len() && cand(b[j]) {
            j += 1;
        }
        from = j;
        let start = if r0 == 0 || !b[r0 - 1].is_ascii_alphanumeric() { Some(r0) } else { (r0 + 1..j).find(|&p| b[p - 1] == b'.') };
        if let Some(i) = start {
            ipv6_candidate(text, i, j, out);
        }
    }
}

/// The candidate `text[i..j]` (a whole run, or its tail after a '.').
fn ipv6_candidate(text: &str, i: usize, j: usize, out: &mut Vec<Finding>) {
    let b = text.as_bytes();
    let mut e = j;
    while e > i && b[e - 1] == b'.' {
        e -= 1;
    }
    if e > i + 1 && b[e - 1] == b':' && b[e - 2] != b':' {
        e -= 1;
    }
    let s = &text[i..e];
    // Most candidates are words that start with a hex letter: the colon
    // count rules them out before anything is split or parsed.
    let colons = s.bytes().filter(|&c| c == b':').count();
    if colons >= 2
        && s.split(':').filter(|g| !g.is_empty()).count() >= 2
        && !b.get(j).is_some_and(|c| c.is_ascii_alphanumeric())
        && s.parse::<std::net::Ipv6Addr>().is_ok()
        && (colons >= 3 || s.bytes().any(|c| c.is_ascii_digit()))
    {
        out.push(Finding::new(i, e, "ip_address", Class::Pii, 0.7));
    }
}

fn national_ids(text: &str, blocks: &Blocks, out: &mut Vec<Finding>) {
    let n = text.len();
    // Every id starts with a digit, or with an uppercase letter followed
    // (later) by digits: blocks with neither are skipped.
    let wanted = |bl: &Blocks, k| bl.at(k) & DIGIT != 0 || (bl.at(k) & UPPER != 0 && bl.digit_from(k));
    let b = text.as_bytes();
    let mut i = blocks.next(0, n, wanted);
    while i < n {
        // The same start test as `national_id_at`'s, inline: most bytes fail it.
        if (b[i].is_ascii_digit() || b[i].is_ascii_uppercase()) && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            national_id_at(b, i, out);
        }
        i = blocks.next(i + 1, n, wanted);
    }
}

/// A Spanish DNI/NIE or a UK NINO starting at `i`.
fn national_id_at(b: &[u8], i: usize, out: &mut Vec<Finding>) {
    let n = b.len();
    if i > 0 && b[i - 1].is_ascii_alphanumeric() {
        return;
    }
    // Spanish DNI (8 digits + letter) and NIE (X/Y/Z + 7 digits + letter).
    let (num_start, prefix) = match b[i] {
        b'X' | b'Y' | b'Z' => (i + 1, u32::from(b[i] - b'X')),
        c if c.is_ascii_digit() => (i, 0),
        _ => (usize::MAX, 0),
    };
    if num_start != usize::MAX {
        let digits = if num_start == i { 8 } else { 7 };
        let end = num_start + digits;
        if end < n && b[num_start..end].iter().all(u8::is_ascii_digit) {
            let letter_at = if b[end] == b'-' || b[end] == b' ' { end + 1 } else { end };
            if let Some(&letter) = b.get(letter_at) {
                let value = b[num_start..end].iter().fold(prefix, |a, d| a * 10 + u32::from(d - b'0'));
                let value = if num_start == i { value } else { prefix * 10_000_000 + value % 10_000_000 };
                if letter == checks::es_dni_letter(value) && !alnum(b.get(letter_at + 1)) {
                    out.push(Finding::new(i, letter_at + 1, "es_dni", Class::Pii, 0.9));
                    return;
                }
            }
        }
    }
    // UK NINO: AB 12 34 56 C (spaces optional).
    if i + 9 <= n && checks::uk_nino_prefix(b[i], b[i + 1]) {
        let mut j = i + 2;
        let mut digits = 0;
        while j < n && digits < 6 {
            if b[j].is_ascii_digit() {
                digits += 1;
            } else if !(b[j] == b' ' && digits % 2 == 0) {
                break;
            }
            j += 1;
        }
        if digits == 6 {
            if j < n && b[j] == b' ' {
                j += 1;
            }
            if j < n && matches!(b[j], b'A'..=b'D') && !alnum(b.get(j + 1)) {
                out.push(Finding::new(i, j + 1, "uk_nino", Class::Pii, 0.8));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, String)> {
        let mut v = Vec::new();
        scan(text, &mut v);
        let v = crate::finding::resolve(v);
        v.into_iter().map(|f| (f.kind.to_string(), text[f.start..f.end].to_string())).collect()
    }

    fn one(text: &str, kind: &str, value: &str) {
        assert_eq!(kinds(text), vec![(kind.to_string(), value.to_string())], "{text}");
    }

    /// The byte-by-byte IPv6 scan that `ipv6` reproduces from the colons.
    fn ipv6_reference(text: &str, out: &mut Vec<Finding>) {
        let b = text.as_bytes();
        let cand = |c: u8| c.is_ascii_hexdigit() || c == b':' || c == b'.';
        let mut i = 0;
        while i < b.len() {
            if !cand(b[i]) || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b':')) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < b.len() && cand(b[j]) {
                j += 1;
            }
            ipv6_candidate(text, i, j, out);
            i = j.max(i + 1);
        }
    }

    #[test]
    fn context_words_start_with_a_letter_and_never_overlap_themselves() {
        let lists = [PHONE_WORDS, SSN_WORDS, SIN_WORDS, crate::dlp::AWS_WORDS];
        for w in lists.iter().flat_map(|l| l.iter()) {
            assert!(w.as_bytes()[0].is_ascii_lowercase(), "{w}");
            let b = w.as_bytes();
            assert!((1..b.len()).all(|k| b[..k] != b[b.len() - k..]), "{w} overlaps itself");
        }
    }

    #[test]
    fn context_in_place_is_the_lowercased_search() {
        for (t, words) in [
            ("my SSN: 123", SSN_WORDS),
            ("since 123", SIN_WORDS),
            ("sin123 123", SIN_WORDS),
            ("Social  Security 123", SSN_WORDS),
            ("xtel 123", PHONE_WORDS),
            ("TeLePhOnE: 123", PHONE_WORDS),
            ("cellular 123", PHONE_WORDS),
            ("the NAS: 123", SIN_WORDS),
            ("aws_secret 123", crate::dlp::AWS_WORDS),
        ] {
            let at = t.len() - 3;
            assert_eq!(context_before(t, at, 40, words), context_before_unicode(&t[..at], words), "{t}");
        }
    }

    #[test]
    fn ipv6_from_colons_is_the_byte_scan() {
        for t in [
            "v6 2001:db8::8a2e:370:7334 ok",
            "fe80::1",
            "x2001:db8::1 .fe80::1 a.b::1 ::1 1.2::3.4:: ab:cd:ef:: face:: ::ffff:1.2.3.4.",
            "std::vec::Vec 12:30:45 de:ad:be:ef:00:11 :::: a::b::c",
            "g.2001:db8::1: z.::1 1::2:3: e.f.::9 é::1 ::",
        ] {
            let (mut a, mut r) = (Vec::new(), Vec::new());
            ipv6(t, &mut a);
            ipv6_reference(t, &mut r);
            assert_eq!(a, r, "{t}");
        }
    }

    #[test]
    fn emails_and_phones() {
        one("mail ann.lee@example.com now", "email", "ann.lee@example.com");
        one("call +44 20 7946 0958 today", "phone", "+44 20 7946 0958");
        one("office: (555) 234-5678.", "phone", "(555) 234-5678");
        one("ring 555-234-5678", "phone", "555-234-5678");
        one("Tel. 06 12 34 56 78", "phone", "06 12 34 56 78");
        one("UK 020 7946 0958", "phone", "020 7946 0958");
        one("phone: 5552345678", "phone", "5552345678");
        one("+4915112345678", "phone", "+4915112345678");
    }

    #[test]
    fn numbers_that_are_not_pii() {
        for t in [
            "order 4471 costs 20 EUR",
            "on 2024-10-05 at 10:30",
            "version 1.2.3",
            "pi is 3.14159265358979",
            "call me in 5 minutes",
            "invoice 2024-117 total 270",
            "1234 5678 9012 3456",
            "id 123456789",
            "ratio 3:2",
            "std::vec::Vec",
            "12:30:45",
        ] {
            assert!(kinds(t).is_empty(), "{t}: {:?}", kinds(t));
        }
    }

    #[test]
    fn cards_ibans_ips_and_ids() {
        one("card 4111 1111 1111 1111 exp 12/27", "card_number", "4111 1111 1111 1111");
        one("card 4111-1111-1111-1111", "card_number", "4111-1111-1111-1111");
        one("amex 378282246310005", "card_number", "378282246310005");
        one("IBAN DE89 3704 0044 0532 0130 00 please", "iban", "DE89 3704 0044 0532 0130 00");
        one("IBAN GB82WEST12345698765432", "iban", "GB82WEST12345698765432");
        one("host 192.168.1.20 is down", "ip_address", "192.168.1.20");
        one("v6 2001:db8::8a2e:370:7334 ok", "ip_address", "2001:db8::8a2e:370:7334");
        one("link-local fe80::1 ok", "ip_address", "fe80::1");
        one("SSN 123-45-6789", "us_ssn", "123-45-6789");
        one("my ssn is 123456789", "us_ssn", "123456789");
        one("SIN 046-454-286", "ca_sin", "046-454-286");
        one("DNI 12345678Z", "es_dni", "12345678Z");
        one("NIE X1234567L", "es_dni", "X1234567L");
        one("NI number AB 12 34 56 C", "uk_nino", "AB 12 34 56 C");
        assert!(kinds("IBAN DE89 3704 0044 0532 0130 01").is_empty());
        assert!(kinds("not an ip 999.1.1.1").is_empty());
        assert!(kinds("DNI 12345678A").is_empty());
    }
}
