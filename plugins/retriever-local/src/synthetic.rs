//! A deterministic synthetic corpus for benchmarks.
//!
//! Words come from a generated 20,000-word vocabulary (pronounceable
//! syllable strings, shorter words more frequent) drawn with a Zipf law
//! (s = 1), as word frequencies in natural text roughly follow. Each document
//! has a title, one to three `##` sections with headings, and paragraphs of
//! sentences. Paths spread over 40 folders; one in ten is a `.txt` file with
//! underlined headings and one in twenty an `.html` page, so a benchmark also
//! exercises those parsers. 10,000 documents come to about 5 MB.

const VOCABULARY: usize = 20_000;
const SYLLABLES_START: &[&str] =
    &["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st", "tr", "ch", "sh", "pl"];
const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"];
const CODAS: &[&str] = &["", "", "", "n", "r", "s", "t", "l", "m", "ck", "nd", "rt"];

/// SplitMix64: small, fast, and stable across versions (unlike `rand`'s `StdRng`).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.range(0, xs.len() - 1)]
    }
}

struct Zipf {
    words: Vec<String>,
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(rng: &mut Rng) -> Zipf {
        let mut seen = std::collections::HashSet::new();
        let mut words = Vec::with_capacity(VOCABULARY);
        while words.len() < VOCABULARY {
            // Frequent (low-rank) words are short, as in natural language.
            let syllables = match words.len() {
                0..100 => 1,
                100..2000 => rng.range(1, 2),
                2000..10_000 => rng.range(2, 3),
                _ => rng.range(2, 4),
            };
            let w: String =
                (0..syllables).map(|_| format!("{}{}{}", rng.pick(SYLLABLES_START), rng.pick(VOWELS), rng.pick(CODAS))).collect();
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        let mut cdf = Vec::with_capacity(VOCABULARY);
        let mut total = 0.0;
        for rank in 1..=VOCABULARY {
            total += 1.0 / rank as f64;
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { words, cdf }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        let i = self.cdf.partition_point(|&c| c < u).min(VOCABULARY - 1);
        &self.words[i]
    }

    /// `n` words, the first capitalised.
    fn phrase(&self, rng: &mut Rng, n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            let w = self.word(rng);
            if i == 0 {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    s.extend(f.to_uppercase());
                    s.push_str(c.as_str());
                }
            } else {
                s.push(' ');
                s.push_str(w);
            }
        }
        s
    }
}

/// `n` documents as `(relative path, text)`; the same `(n, seed)` always gives
/// the same corpus, and a larger `n` extends a smaller one.
pub fn corpus(n: usize, seed: u64) -> Vec<(String, String)> {
    let zipf = Zipf::new(&mut Rng(seed ^ 0x5EED));
    (0..n)
        .map(|i| {
            let mut rng = Rng(seed.wrapping_mul(0x100_0000_01B3).wrapping_add(i as u64));
            document(&zipf, &mut rng, i)
        })
        .collect()
}

fn document(zipf: &Zipf, rng: &mut Rng, i: usize) -> (String, String) {
    let (ext, style) = match i % 20 {
        13 => ("html", 2),
        7 | 17 => ("txt", 1),
        _ => ("md", 0),
    };
    let path = format!("topic-{:02}/doc-{i:05}.{ext}", i % 40);
    let n = rng.range(2, 5);
    let title = zipf.phrase(rng, n);
    let mut out = String::new();
    match style {
        0 => out.push_str(&format!("# {title}\n\n")),
        1 => out.push_str(&format!("{title}\n{}\n\n", "=".repeat(title.chars().count()))),
        _ => out.push_str(&format!("<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n<h1>{title}</h1>\n")),
    }
    for _ in 0..rng.range(1, 3) {
        let n = rng.range(2, 4);
        let heading = zipf.phrase(rng, n);
        match style {
            0 => out.push_str(&format!("## {heading}\n\n")),
            1 => out.push_str(&format!("{heading}\n{}\n\n", "-".repeat(heading.chars().count()))),
            _ => out.push_str(&format!("<h2>{heading}</h2>\n")),
        }
        for _ in 0..rng.range(1, 2) {
            let mut para = String::new();
            for s in 0..rng.range(2, 3) {
                if s > 0 {
                    para.push(' ');
                }
                let n = rng.range(5, 13);
                para.push_str(&zipf.phrase(rng, n));
                para.push('.');
            }
            match style {
                2 => out.push_str(&format!("<p>{para}</p>\n")),
                _ => out.push_str(&format!("{para}\n\n")),
            }
        }
    }
    if style == 2 {
        out.push_str("</body></html>\n");
    }
    (path, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_prefix_stable() {
        let a = corpus(50, 7);
        assert_eq!(a, corpus(50, 7));
        assert_eq!(a[..20], corpus(20, 7)[..]);
        assert_ne!(a, corpus(50, 8));
        assert!(a.iter().any(|(p, _)| p.ends_with(".html")) && a.iter().any(|(p, _)| p.ends_with(".txt")));
    }

    #[test]
    fn about_half_a_kilobyte_per_document_with_zipf_words() {
        let c = corpus(1000, 1);
        let bytes: usize = c.iter().map(|(_, t)| t.len()).sum();
        assert!((350_000..700_000).contains(&bytes), "{bytes}");
        let idx = crate::Index::build(c, crate::Options::default());
        assert_eq!(idx.stats().documents, 1000);
        assert!(idx.stats().terms > 3000, "{:?}", idx.stats());
    }
}
