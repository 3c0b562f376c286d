//! Retrieval-quality evaluation: recall@1, recall@3 and MRR at page level,
//! for retriever-local and for a plain BM25 baseline, over a labelled
//! question set (see `eval/README.md`).
//!
//! The baseline is deliberately the textbook one: Okapi BM25 (k1 = 1.2,
//! b = 0.75) over each WHOLE file's raw text, terms = lower-cased
//! alphanumeric runs with the same stop words removed, no stemming, no
//! fields, no chunking.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::index::{Index, Options};
use crate::text::{is_stop_word, raw_tokens};
use crate::walk;

/// One labelled question.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Question {
    /// What a user would ask.
    pub question: String,
    /// Pages (paths relative to the corpus folder) that answer it.
    pub pages: Vec<String>,
}

/// Page-level quality figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metrics {
    /// Questions evaluated.
    pub questions: usize,
    /// Share of questions whose first page answers them.
    pub recall_at_1: f64,
    /// Share of questions with an answering page among the first three.
    pub recall_at_3: f64,
    /// Mean reciprocal rank of the first answering page (0 beyond 10).
    pub mrr: f64,
    /// Mean reciprocal rank cut at 3 (0 beyond rank 3).
    pub mrr_at_3: f64,
}

/// The shipped evaluation folder (`plugins/retriever-local/eval`).
pub fn eval_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("eval")
}

/// Reads `questions.jsonl` (one JSON object per line; blank lines ignored).
pub fn load_questions(path: &Path) -> Result<Vec<Question>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1)))
        .collect()
}

/// Reads the corpus folder as `(relative path, text)`.
pub fn load_corpus(dir: &Path) -> Result<Vec<(String, String)>, String> {
    Ok(walk::read_dir(dir, walk::Limits::default())?.files)
}

/// Scores a ranker: `rank(question)` returns pages best first (distinct).
pub fn evaluate(questions: &[Question], mut rank: impl FnMut(&str) -> Vec<String>) -> Metrics {
    let (mut r1, mut r3, mut rr, mut rr3) = (0.0, 0.0, 0.0, 0.0);
    for q in questions {
        let pages = rank(&q.question);
        let first = pages.iter().take(10).position(|p| q.pages.contains(p));
        if first == Some(0) {
            r1 += 1.0;
        }
        if let Some(i) = first.filter(|&i| i < 3) {
            r3 += 1.0;
            rr3 += 1.0 / (i + 1) as f64;
        }
        if let Some(i) = first {
            rr += 1.0 / (i + 1) as f64;
        }
    }
    let n = questions.len().max(1) as f64;
    Metrics { questions: questions.len(), recall_at_1: r1 / n, recall_at_3: r3 / n, mrr: rr / n, mrr_at_3: rr3 / n }
}

/// Pages of retriever-local's results, in order of their best passage.
pub fn local_pages(index: &Index, query: &str, n: usize) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    for hit in index.search(query, n) {
        if !pages.contains(&hit.source) {
            pages.push(hit.source);
        }
    }
    pages
}

/// Plain BM25 over whole pages or over fixed-size chunks of them: the baselines.
pub struct PlainBm25 {
    pages: Vec<String>,
    /// Page of each unit (a unit is a whole page or one chunk).
    page_of: Vec<u32>,
    lens: Vec<f32>,
    avg: f32,
    postings: HashMap<String, Vec<(u32, u32)>>,
}

impl PlainBm25 {
    /// Indexes each file's raw text as one unit.
    pub fn build(files: &[(String, String)]) -> PlainBm25 {
        Self::build_units(files, None)
    }

    /// Indexes chunks of at most `words` words of each file's raw text (no
    /// overlap; cut at paragraph or sentence ends where [`crate::chunk::split`]
    /// finds one); a page ranks at the rank of its best chunk.
    pub fn build_chunked(files: &[(String, String)], words: usize) -> PlainBm25 {
        Self::build_units(files, Some(words))
    }

    fn build_units(files: &[(String, String)], words: Option<usize>) -> PlainBm25 {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lens = Vec::new();
        let mut page_of = Vec::new();
        for (i, (_, text)) in files.iter().enumerate() {
            let units = match words {
                None => vec![(0, text.len())],
                Some(w) => crate::chunk::split(text, w, 0),
            };
            for (a, b) in units {
                let unit = page_of.len() as u32;
                page_of.push(i as u32);
                let mut tf: HashMap<String, u32> = HashMap::new();
                let mut len = 0;
                for t in raw_tokens(&text[a..b]).filter(|t| !is_stop_word(t)) {
                    *tf.entry(t.into_owned()).or_default() += 1;
                    len += 1;
                }
                for (t, n) in tf {
                    postings.entry(t).or_default().push((unit, n));
                }
                lens.push(len as f32);
            }
        }
        let avg = lens.iter().sum::<f32>() / lens.len().max(1) as f32;
        PlainBm25 { pages: files.iter().map(|(p, _)| p.clone()).collect(), page_of, lens, avg, postings }
    }

    /// Up to `n` pages, best first.
    pub fn rank(&self, query: &str, n: usize) -> Vec<String> {
        let (k1, b) = (1.2f32, 0.75f32);
        let mut terms: Vec<String> = raw_tokens(query).filter(|t| !is_stop_word(t)).map(|t| t.into_owned()).collect();
        terms.sort();
        terms.dedup();
        let mut scores = vec![0f32; self.lens.len()];
        let total = self.lens.len() as f32;
        for t in &terms {
            let Some(ps) = self.postings.get(t) else { continue };
            let df = ps.len() as f32;
            let idf = (1.0 + (total - df + 0.5) / (df + 0.5)).ln();
            for &(d, tf) in ps {
                let tf = tf as f32;
                let norm = 1.0 - b + b * self.lens[d as usize] / self.avg;
                scores[d as usize] += idf * tf * (k1 + 1.0) / (tf + k1 * norm);
            }
        }
        let mut order: Vec<usize> = (0..self.lens.len()).filter(|&i| scores[i] > 0.0).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let mut out: Vec<String> = Vec::new();
        for i in order {
            let page = &self.pages[self.page_of[i] as usize];
            if !out.contains(page) {
                out.push(page.clone());
                if out.len() == n {
                    break;
                }
            }
        }
        out
    }
}

/// One labelled corpus: a folder of pages and its questions.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Short name ("pydoc", "debian-faq"…).
    pub name: &'static str,
    /// The pages.
    pub pages: PathBuf,
    /// `questions.jsonl`.
    pub questions: PathBuf,
    /// The corpus every parameter is chosen on; the others are held out.
    pub tuning: bool,
}

/// The tuning corpus (CPython's pydoc topics) and the held-out ones (see `eval/README.md`).
pub fn corpora() -> Vec<Corpus> {
    let dir = eval_dir();
    let mut out = vec![Corpus { name: "pydoc", pages: dir.join("corpus"), questions: dir.join("questions.jsonl"), tuning: true }];
    for name in HELD_OUT {
        let d = dir.join("heldout").join(name);
        out.push(Corpus { name, pages: d.join("corpus"), questions: d.join("questions.jsonl"), tuning: false });
    }
    out
}

/// The held-out corpora, never tuned on.
pub const HELD_OUT: [&str; 3] = ["debian-faq", "postgres-admin", "perl-manual"];

/// Results asked of each ranker in the multi-corpus report (the top_k).
pub const TOP_K: usize = 4;

/// The bar: hybrid recall@1 at least this far above plain BM25 over
/// 300-word chunks on every held-out corpus.
pub const HELD_OUT_BAR: f64 = 0.08;

/// The recall@1 margin over chunked BM25 that the test holds hybrid retrieval
/// to on each held-out corpus: the bar, now reached on every one
/// (measured +0.133 / +0.083 / +0.100 on debian-faq / postgres-admin /
/// perl-manual with the window re-ranking chosen on the tuning corpus; the
/// perl-manual floor was the measured +0.050 before it). A corpus where a
/// later change misses the bar gets its measured margin here, with the reason.
pub fn held_out_floor(_corpus: &str) -> f64 {
    HELD_OUT_BAR - 1e-9
}

/// Size of the chunks of the chunked plain-BM25 baseline, in words.
pub const BASELINE_CHUNK_WORDS: usize = 300;

/// A corpus's pages `(relative path, text)` and its questions.
pub type Loaded = (Vec<(String, String)>, Vec<Question>);

/// Reads a corpus and its questions; fails if a question names a page that
/// is not there, or has no page, or if a question is repeated.
pub fn load(c: &Corpus) -> Result<Loaded, String> {
    let files = load_corpus(&c.pages)?;
    let questions = load_questions(&c.questions)?;
    let known: std::collections::HashSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let mut seen = std::collections::HashSet::new();
    for q in &questions {
        if q.pages.is_empty() || q.question.trim().is_empty() {
            return Err(format!("{}: a question without text or pages: {:?}", c.name, q.question));
        }
        if let Some(p) = q.pages.iter().find(|p| !known.contains(p.as_str())) {
            return Err(format!("{}: question {:?} names a page that is not in the corpus: {p}", c.name, q.question));
        }
        if !seen.insert(q.question.as_str()) {
            return Err(format!("{}: question repeated: {:?}", c.name, q.question));
        }
    }
    Ok((files, questions))
}

/// Figures of every ranker on one corpus.
#[derive(Debug, Clone)]
pub struct Row {
    /// The corpus's name.
    pub corpus: &'static str,
    /// Whether it is the tuning corpus.
    pub tuning: bool,
    /// (ranker name, metrics), in a fixed order.
    pub rankers: Vec<(&'static str, Metrics)>,
}

impl Row {
    /// The metrics of the ranker called `name`.
    pub fn get(&self, name: &str) -> Option<Metrics> {
        self.rankers.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }
}

/// Ranker names in [`Row::rankers`].
pub const LEXICAL: &str = "retriever-local lexical (BM25F)";
/// retriever-local, dense vectors only.
pub const DENSE: &str = "retriever-local dense only";
/// retriever-local, lexical and dense fused.
pub const HYBRID: &str = "retriever-local hybrid (lexical + dense)";
/// Plain BM25 over 300-word chunks.
pub const BM25_CHUNKS: &str = "plain BM25, 300-word chunks";
/// Plain BM25 over whole pages.
pub const BM25_PAGES: &str = "plain BM25, whole pages";

/// Runs every ranker on one corpus at [`TOP_K`]: retriever-local returns 4
/// passages (pages = their documents in order), the baselines their 4 best
/// pages. `lexical` are the lexical-only index's options, `hybrid` those of
/// the hybrid one (which must name a model); dense-only is `hybrid` without
/// its lexical side.
pub fn report_corpus(c: &Corpus, lexical: &Options, hybrid: &Options) -> Result<Row, String> {
    let (files, questions) = load(c)?;
    let pages = PlainBm25::build(&files);
    let chunks = PlainBm25::build_chunked(&files, BASELINE_CHUNK_WORDS);
    if hybrid.dense_model.is_none() {
        return Err("the hybrid options name no dense model".into());
    }
    let lexical = Index::build(files.iter().map(|(p, t)| (p, t)), Options { dense_model: None, ..lexical.clone() });
    let dense = Index::build(files.iter().map(|(p, t)| (p, t)), Options { lexical_weight: 0.0, ..hybrid.clone() });
    let hybrid = Index::build(files.iter().map(|(p, t)| (p, t)), hybrid.clone());
    let rankers = vec![
        (LEXICAL, evaluate(&questions, |q| local_pages(&lexical, q, TOP_K))),
        (DENSE, evaluate(&questions, |q| local_pages(&dense, q, TOP_K))),
        (HYBRID, evaluate(&questions, |q| local_pages(&hybrid, q, TOP_K))),
        (BM25_CHUNKS, evaluate(&questions, |q| chunks.rank(q, TOP_K))),
        (BM25_PAGES, evaluate(&questions, |q| pages.rank(q, TOP_K))),
    ];
    Ok(Row { corpus: c.name, tuning: c.tuning, rankers })
}

/// The default options of a hybrid index with the shipped model.
pub fn hybrid_options() -> Options {
    Options::hybrid(crate::dense::SHIPPED_MODEL)
}

/// The full report over the shipped corpus: (retriever-local, plain BM25).
pub fn report() -> Result<(Metrics, Metrics), String> {
    report_with(Options::default())
}

/// The report over the tuning corpus with other index options (for experiments).
pub fn report_with(opts: Options) -> Result<(Metrics, Metrics), String> {
    let c = corpora().into_iter().find(|c| c.tuning).ok_or("no tuning corpus")?;
    let (files, questions) = load(&c)?;
    let baseline = PlainBm25::build(&files);
    let index = Index::build(files, opts);
    let local = evaluate(&questions, |q| local_pages(&index, q, 10));
    let plain = evaluate(&questions, |q| baseline.rank(q, 10));
    Ok((local, plain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_count_ranks() {
        let qs = vec![
            Question { question: "a".into(), pages: vec!["1".into()] },
            Question { question: "b".into(), pages: vec!["2".into(), "9".into()] },
            Question { question: "c".into(), pages: vec!["7".into()] },
        ];
        let m = evaluate(&qs, |_| vec!["1".into(), "3".into(), "2".into()]);
        assert_eq!(m.questions, 3);
        assert!((m.recall_at_1 - 1.0 / 3.0).abs() < 1e-9);
        assert!((m.recall_at_3 - 2.0 / 3.0).abs() < 1e-9);
        assert!((m.mrr - (1.0 + 1.0 / 3.0) / 3.0).abs() < 1e-9);
    }

    #[test]
    fn baseline_is_plain_bm25() {
        let files = vec![("a".to_string(), "cats cats dogs".to_string()), ("b".to_string(), "cat dog dogs birds".to_string())];
        let bm = PlainBm25::build(&files);
        assert_eq!(bm.rank("cats", 5), ["a"]);
        assert_eq!(bm.rank("cat", 5), ["b"], "no stemming");
        assert_eq!(bm.rank("dogs", 5), ["a", "b"]);
    }

    /// The shipped evaluation: retriever-local must beat plain BM25 by 0.08
    /// recall@1 without losing recall@3 (see eval/README.md).
    #[test]
    fn retriever_local_beats_plain_bm25_on_the_shipped_set() {
        let (local, plain) = report().expect("evaluation data");
        assert!(local.questions >= 100, "{local:?}");
        assert!(local.recall_at_1 >= plain.recall_at_1 + 0.08, "local {local:?} vs plain {plain:?}");
        assert!(local.recall_at_3 >= plain.recall_at_3, "local {local:?} vs plain {plain:?}");
    }

    /// Every corpus loads, names only its own pages, and has enough
    /// questions; the held-out corpora are distinct from the tuning one.
    #[test]
    fn corpora_are_well_formed() {
        let all = corpora();
        assert_eq!(all.iter().filter(|c| c.tuning).count(), 1, "one tuning corpus");
        assert!(all.iter().filter(|c| !c.tuning).count() >= 3, "at least three held-out corpora");
        for c in &all {
            let (files, questions) = load(c).unwrap_or_else(|e| panic!("{e}"));
            assert!(files.len() >= 50, "{}: {} pages", c.name, files.len());
            assert!(questions.len() >= if c.tuning { 100 } else { 60 }, "{}: {} questions", c.name, questions.len());
        }
    }

    /// The held-out bar (see [`held_out_floor`]): hybrid retrieval with
    /// its default options against plain BM25 over 300-word chunks, recall@1
    /// margin per corpus, and recall@3 never below.
    #[test]
    fn hybrid_beats_chunked_bm25_on_held_out_corpora() {
        let mut failures = Vec::new();
        for c in corpora().iter().filter(|c| !c.tuning) {
            let (files, questions) = load(c).unwrap_or_else(|e| panic!("{e}"));
            let chunks = PlainBm25::build_chunked(&files, BASELINE_CHUNK_WORDS);
            let hybrid = Index::build(files, hybrid_options());
            let h = evaluate(&questions, |q| local_pages(&hybrid, q, TOP_K));
            let b = evaluate(&questions, |q| chunks.rank(q, TOP_K));
            let margin = h.recall_at_1 - b.recall_at_1;
            if margin < held_out_floor(c.name) || h.recall_at_3 < b.recall_at_3 {
                failures.push(format!("{}: recall@1 margin {margin:+.3}, hybrid {h:?} vs chunked BM25 {b:?}", c.name));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    /// The tuning corpus's hybrid figures, so that a change to the dense
    /// side that only the tuning corpus would show is caught too (measured:
    /// recall@1 +0.043, MRR@3 +0.049 over lexical).
    #[test]
    fn hybrid_beats_lexical_on_the_tuning_corpus() {
        let c = corpora().into_iter().find(|c| c.tuning).expect("tuning corpus");
        let (files, questions) = load(&c).unwrap_or_else(|e| panic!("{e}"));
        let lexical = Index::build(files.iter().map(|(p, t)| (p, t)), Options::default());
        let hybrid = Index::build(files, hybrid_options());
        let l = evaluate(&questions, |q| local_pages(&lexical, q, TOP_K));
        let h = evaluate(&questions, |q| local_pages(&hybrid, q, TOP_K));
        assert!(h.recall_at_1 >= l.recall_at_1 + 0.04 && h.mrr_at_3 >= l.mrr_at_3 + 0.035, "hybrid {h:?} vs lexical {l:?}");
    }
}
