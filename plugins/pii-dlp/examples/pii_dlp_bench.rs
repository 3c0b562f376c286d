//! Per-call cost of `pii-dlp` on a 2 KB prompt, natively.
//!
//! `cargo run --release -p pii-dlp --example pii_dlp_bench`
//!
//! Prints median and p99 for: the built-in detectors (what every call pays);
//! the same with two custom patterns compiled on every call (a fresh instance
//! per request); and with the patterns cached (a warm instance).

use std::time::{Duration, Instant};

fn prompt() -> String {
    let base = "Hi team, please review the attached contract for Globex before Friday. The customer contact is \
                ann.lee@example.com, phone +44 20 7946 0958, and the invoice should go to IBAN DE89 3704 0044 0532 0130 00. \
                Our staging host is 10.0.12.7 and the build failed on 2024-10-05 at 10:30 with error code 4471. \
                Could you also summarise the meeting notes below and suggest next steps for the migration? ";
    let mut s = String::new();
    while s.len() < 2048 {
        s.push_str(base);
        s.push_str("We discussed the roadmap, hiring, and the budget for Q3 in some detail; nothing else was decided. ");
    }
    s.truncate(2048);
    s
}

fn measure(name: &str, n: usize, mut f: impl FnMut()) {
    for _ in 0..n / 10 {
        f();
    }
    let mut t: Vec<Duration> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    println!("{name:<52} median {:>9.1?}   p99 {:>9.1?}", t[n / 2], t[n * 99 / 100]);
}

fn main() {
    let texts = vec![prompt()];
    let plain = r#"{"pii":"redact","dlp":"block"}"#;
    let custom = r#"{"pii":"redact","dlp":"block","custom":[{"name":"employee_id","pattern":"EMP-[0-9]{6}"},{"name":"project","pattern":"(?i)project\\s+(apollo|gemini)"}]}"#;
    let v = pii_dlp::inspect(plain, false, &texts);
    println!(
        "2 KB prompt: {} bytes, verdict {:?}, {} redactions, reasons {:?}\n",
        texts[0].len(),
        v[0].action,
        v[0].redactions.len(),
        v[0].reasons
    );
    measure("built-in detectors (pii redact, dlp block)", 5000, || {
        std::hint::black_box(pii_dlp::inspect(plain, false, &texts));
    });
    measure("+2 custom patterns, compiled every call (cold)", 500, || {
        pii_dlp::config::clear_cache();
        std::hint::black_box(pii_dlp::inspect(custom, false, &texts));
    });
    measure("+2 custom patterns, cached (warm instance)", 5000, || {
        std::hint::black_box(pii_dlp::inspect(custom, false, &texts));
    });
}
