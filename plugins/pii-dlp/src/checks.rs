//! Check-digit algorithms and format rules for the validated detectors.

/// Luhn (mod 10) over ASCII digits; non-digits are ignored.
pub fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    let mut n = 0;
    for &d in digits.iter().rev().filter(|d| d.is_ascii_digit()) {
        let mut v = u32::from(d - b'0');
        if n % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
        n += 1;
    }
    n > 0 && sum.is_multiple_of(10)
}

/// A payment card: 13-19 digits, a known issuer prefix, and Luhn.
pub fn card(digits: &[u8]) -> bool {
    let len = digits.len();
    if !(13..=19).contains(&len) || !luhn(digits) {
        return false;
    }
    let p = |k: usize| digits[..k].iter().fold(0u32, |a, d| a * 10 + u32::from(d - b'0'));
    let (p1, p2, p3, p4, p6) = (p(1), p(2), p(3), p(4), p(6));
    match p1 {
        4 => matches!(len, 13 | 16 | 19),              // Visa
        5 => (51..=55).contains(&p2) && len == 16,     // Mastercard
        2 => (2221..=2720).contains(&p4) && len == 16, // Mastercard 2-series
        3 => {
            (matches!(p2, 34 | 37) && len == 15)                               // Amex
                || ((3528..=3589).contains(&p4) && (16..=19).contains(&len))    // JCB
                || ((300..=305).contains(&p3) || matches!(p2, 36 | 38 | 39)) && (14..=19).contains(&len) // Diners
        }
        6 => {
            (p4 == 6011 || p2 == 65 || (644..=649).contains(&p3) || (622126..=622925).contains(&p6)) && (16..=19).contains(&len)
                || p2 == 62 && (16..=19).contains(&len) // UnionPay
        }
        _ => false,
    }
}

/// IBAN length by country (ISO 13616 registry, common countries).
fn iban_length(cc: &[u8]) -> Option<usize> {
    Some(match cc {
        b"AD" => 24,
        b"AE" => 23,
        b"AL" => 28,
        b"AT" => 20,
        b"AZ" => 28,
        b"BA" => 20,
        b"BE" => 16,
        b"BG" => 22,
        b"BH" => 22,
        b"BR" => 29,
        b"CH" => 21,
        b"CR" => 22,
        b"CY" => 28,
        b"CZ" => 24,
        b"DE" => 22,
        b"DK" => 18,
        b"DO" => 28,
        b"EE" => 20,
        b"EG" => 29,
        b"ES" => 24,
        b"FI" => 18,
        b"FO" => 18,
        b"FR" => 27,
        b"GB" => 22,
        b"GE" => 22,
        b"GI" => 23,
        b"GL" => 18,
        b"GR" => 27,
        b"GT" => 28,
        b"HR" => 21,
        b"HU" => 28,
        b"IE" => 22,
        b"IL" => 23,
        b"IQ" => 23,
        b"IS" => 26,
        b"IT" => 27,
        b"JO" => 30,
        b"KW" => 30,
        b"KZ" => 20,
        b"LB" => 28,
        b"LI" => 21,
        b"LT" => 20,
        b"LU" => 20,
        b"LV" => 21,
        b"MC" => 27,
        b"MD" => 24,
        b"ME" => 22,
        b"MK" => 19,
        b"MR" => 27,
        b"MT" => 31,
        b"MU" => 30,
        b"NL" => 18,
        b"NO" => 15,
        b"PK" => 24,
        b"PL" => 28,
        b"PS" => 29,
        b"PT" => 25,
        b"QA" => 29,
        b"RO" => 24,
        b"RS" => 22,
        b"SA" => 24,
        b"SE" => 24,
        b"SI" => 19,
        b"SK" => 24,
        b"SM" => 27,
        b"TN" => 24,
        b"TR" => 26,
        b"UA" => 29,
        b"VA" => 22,
        b"VG" => 24,
        b"XK" => 20,
        _ => return None,
    })
}

/// Expected IBAN length for the country code at the start of `iban`.
pub fn iban_expected_len(iban: &[u8]) -> Option<usize> {
    iban.get(..2).and_then(iban_length)
}

/// ISO 7064 mod 97-10 over an IBAN without spaces (uppercase letters, digits).
pub fn iban_mod97(iban: &[u8]) -> bool {
    if iban.len() < 5 || iban_expected_len(iban) != Some(iban.len()) {
        return false;
    }
    let mut rem = 0u32;
    for &c in iban[4..].iter().chain(&iban[..4]) {
        match c {
            b'0'..=b'9' => rem = (rem * 10 + u32::from(c - b'0')) % 97,
            b'A'..=b'Z' => rem = (rem * 100 + u32::from(c - b'A') + 10) % 97,
            _ => return false,
        }
    }
    rem == 1
}

/// US SSN rules: area not 000, 666 or 9xx; group not 00; serial not 0000.
pub fn us_ssn(area: &[u8], group: &[u8], serial: &[u8]) -> bool {
    area.len() == 3
        && group.len() == 2
        && serial.len() == 4
        && area != b"000"
        && area != b"666"
        && area[0] != b'9'
        && group != b"00"
        && serial != b"0000"
}

/// Spanish DNI/NIE control letter: `number` is 8 digits (NIE: X/Y/Z mapped to 0/1/2).
pub fn es_dni_letter(number: u32) -> u8 {
    b"TRWAGMYFPDXBNJZSQVHLCKE"[(number % 23) as usize]
}

/// UK National Insurance number prefix rules (two letters).
pub fn uk_nino_prefix(a: u8, b: u8) -> bool {
    let bad_first = b"DFIQUV";
    let bad_second = b"DFIOQUV";
    a.is_ascii_uppercase()
        && b.is_ascii_uppercase()
        && !bad_first.contains(&a)
        && !bad_second.contains(&b)
        && !matches!(&[a, b], b"BG" | b"GB" | b"NK" | b"KN" | b"TN" | b"NT" | b"ZZ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_and_cards() {
        assert!(luhn(b"79927398713"));
        assert!(!luhn(b"79927398710"));
        assert!(card(b"4111111111111111"));
        assert!(card(b"5500005555555559"));
        assert!(card(b"378282246310005"));
        assert!(card(b"6011111111111117"));
        assert!(!card(b"4111111111111112"));
        assert!(!card(b"1234567812345670")); // Luhn-valid, no issuer
    }

    #[test]
    fn ibans() {
        assert!(iban_mod97(b"DE89370400440532013000"));
        assert!(iban_mod97(b"GB82WEST12345698765432"));
        assert!(iban_mod97(b"FR1420041010050500013M02606"));
        assert!(!iban_mod97(b"DE89370400440532013001"));
        assert!(!iban_mod97(b"DE8937040044053201300")); // wrong length
    }

    #[test]
    fn national_ids() {
        assert!(us_ssn(b"123", b"45", b"6789"));
        assert!(!us_ssn(b"666", b"45", b"6789"));
        assert!(!us_ssn(b"923", b"45", b"6789"));
        assert_eq!(es_dni_letter(12345678), b'Z');
        assert!(uk_nino_prefix(b'A', b'B'));
        assert!(!uk_nino_prefix(b'G', b'B'));
        assert!(!uk_nino_prefix(b'D', b'A'));
    }
}
