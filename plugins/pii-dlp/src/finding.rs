//! Findings of the scanners and how overlapping ones are resolved.

use std::borrow::Cow;

/// Which policy setting governs a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Personal data (`pii` action).
    Pii,
    /// Secrets and DLP rules (`dlp` action).
    Dlp,
    /// An operator's custom pattern (its own action, else `dlp`); index into the config.
    Custom(usize),
}

/// One match: byte span, kind and confidence. Never carries the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset after the last byte.
    pub end: usize,
    /// Kind, e.g. `email`, `aws_access_key`, `custom:employee_id`.
    pub kind: Cow<'static, str>,
    /// Policy class.
    pub class: Class,
    /// 0..=1: how sure the detector is (checksums and fixed prefixes are high).
    pub confidence: f32,
}

impl Finding {
    /// A built-in finding.
    pub fn new(start: usize, end: usize, kind: &'static str, class: Class, confidence: f32) -> Finding {
        Finding { start, end, kind: Cow::Borrowed(kind), class, confidence }
    }

    fn overlaps(&self, other: &Finding) -> bool {
        self.start < other.end && other.start < self.end
    }

    fn rank(&self) -> (u8, usize) {
        let class = match self.class {
            Class::Custom(_) => 2,
            Class::Dlp => 1,
            Class::Pii => 0,
        };
        (class, self.end - self.start)
    }
}

/// Keep non-overlapping findings: custom rules beat secrets, secrets beat
/// personal data, a longer span beats a shorter one. Sorted by start.
pub fn resolve(mut all: Vec<Finding>) -> Vec<Finding> {
    all.sort_by(|a, b| b.rank().cmp(&a.rank()).then(a.start.cmp(&b.start)));
    let mut kept: Vec<Finding> = Vec::with_capacity(all.len());
    for f in all {
        if f.start < f.end && !kept.iter().any(|k| k.overlaps(&f)) {
            kept.push(f);
        }
    }
    kept.sort_by_key(|f| f.start);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_win_over_pii_and_longer_wins() {
        let v = resolve(vec![
            Finding::new(0, 10, "phone", Class::Pii, 0.7),
            Finding::new(0, 40, "jwt", Class::Dlp, 0.99),
            Finding::new(50, 55, "ip_address", Class::Pii, 0.6),
            Finding::new(48, 60, "email", Class::Pii, 0.9),
        ]);
        let kinds: Vec<&str> = v.iter().map(|f| f.kind.as_ref()).collect();
        assert_eq!(kinds, ["jwt", "email"]);
    }
}
