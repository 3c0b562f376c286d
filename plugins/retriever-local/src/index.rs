//! The in-memory inverted index and its ranking.
//!
//! Ranking: BM25F at two levels, summed.
//! - Passage level: fields title (the document's), heading path, passage
//!   text, weighted by [`Options::title_weight`] / [`Options::heading_weight`] / 1,
//!   each length-normalised against its own average (Robertson & Zaragoza's
//!   BM25F: weighted, normalised term frequencies summed before saturation).
//! - Page level: the same over the whole document (title, all headings, all
//!   text), scaled by [`Options::document_weight`] and added to each of its
//!   passages, so a passage from a page that is about the query beats an
//!   equally matching passage from a page that mentions it in passing.
//!
//! Terms are stemmed, stop words dropped ([`crate::text`]). Results: best first;
//! the n-th further passage of a document has its score multiplied by 0.5^n,
//! so distinct documents fill the top unless one document is far better.

use std::collections::HashMap;
use std::sync::Arc;

use crate::chunk;
use crate::dense;
use crate::extract;
use rustc_hash::FxHashMap;

use crate::text::{Analyzer, is_stop_word, raw_tokens};

/// Tunables of index building and ranking. k1 = 1.2 and b = 0.75 are the
/// textbook BM25 values; 100-word passages are the size DPR (Karpukhin et
/// al., 2020) used. `chunk_words` was chosen after trying 60-300 on the
/// evaluation set (see `eval/README.md` for the sensitivity table); the
/// weights were set before and left alone. The hybrid options (linear fusion,
/// dense weight 4) were chosen on the tuning corpus only (`model/README.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Maximum words per passage.
    pub chunk_words: usize,
    /// Words repeated between consecutive passages of a section cut mid-paragraph.
    pub overlap_words: usize,
    /// Weight of the document title field.
    pub title_weight: f32,
    /// Weight of the heading field.
    pub heading_weight: f32,
    /// Weight of the page-level score added to each passage's score.
    pub document_weight: f32,
    /// BM25 term-frequency saturation.
    pub k1: f32,
    /// BM25 length normalisation.
    pub b: f32,
    /// Weight of the proximity bonus: query terms adjacent in the query that
    /// occur near each other in a passage (see [`PROXIMITY_WINDOW`]).
    pub proximity_weight: f32,
    /// Hybrid retrieval: the model file (a path the plugin can read) whose
    /// token embeddings give the passages' dense vectors. `None` (the
    /// default) = lexical only: no model is read, no vector built, so an
    /// index that does not ask for dense retrieval costs nothing more.
    pub dense_model: Option<String>,
    /// Weight of the dense ranking in the fusion; 0 = lexical only.
    pub dense_weight: f32,
    /// Weight of the lexical ranking in the fusion (0 = dense only, for the
    /// evaluation); used only when `dense_weight` > 0.
    pub lexical_weight: f32,
    /// The constant k of reciprocal rank fusion: a document at rank r
    /// scores weight / (k + r). 0 = linear fusion instead: a document scores
    /// `lexical_weight * lexical / best lexical + dense_weight * cosine`.
    pub rrf_k: f32,
    /// Dense pseudo-relevance feedback: after a first fusion the query vector
    /// moves by this weight towards the mean of the best passages of the
    /// first `feedback_docs` documents, and the passages are scanned again.
    /// 0 = none.
    pub dense_feedback: f32,
    /// Documents whose best passages feed `dense_feedback`.
    pub feedback_docs: usize,
    /// Linear fusion over min-max normalised scores (each ranking spread
    /// over [0, 1] within the fusion depth) instead of `lexical / best
    /// lexical + dense_weight × cosine`. Measured on the tuning corpus.
    pub min_max_fusion: bool,
    /// Re-ranking of the first fused documents by their best window of
    /// `window_words` words (see `Index::rerank_windows`); 0 = none.
    pub window_rerank: f32,
    /// Words of one re-ranking window.
    pub window_words: usize,
}

/// Passage size of a hybrid index unless its config sets one: chosen on the
/// tuning corpus (hybrid MRR@3 0.847 at 300 words, 0.842 at 100; lexical-only
/// indexes keep 100, see `eval/README.md`). Larger passages also mean fewer
/// vectors to scan per query.
pub const HYBRID_CHUNK_WORDS: usize = 300;

impl Options {
    /// The default options of a hybrid index with the model at `model`.
    pub fn hybrid(model: &str) -> Options {
        Options { dense_model: Some(model.to_owned()), chunk_words: HYBRID_CHUNK_WORDS, ..Options::default() }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            chunk_words: 100,
            overlap_words: 30,
            title_weight: 3.0,
            heading_weight: 2.0,
            document_weight: 0.5,
            k1: 1.2,
            b: 0.75,
            proximity_weight: 1.0,
            dense_model: None,
            dense_weight: 4.0,
            lexical_weight: 1.0,
            rrf_k: 0.0,
            dense_feedback: 0.0,
            feedback_docs: 3,
            min_max_fusion: false,
            window_rerank: WINDOW_RERANK,
            window_words: WINDOW_WORDS,
        }
    }
}

/// Two query terms count as near when at most this many indexed terms apart
/// in the passage (stop words are not indexed, so "exclusive or of" is 1 apart).
pub const PROXIMITY_WINDOW: usize = 3;

/// Passages re-scored with the proximity bonus (the best by BM25F).
const RERANK: usize = 200;

/// Score factor for each further passage of the same document.
const SAME_DOC_DECAY: f32 = 0.5;

/// Field numbers.
const TITLE: usize = 0;
const HEADING: usize = 1;
const BODY: usize = 2;

#[derive(Debug, Clone, Copy)]
struct Posting {
    id: u32,
    /// Per-field term frequency, saturated at 255 (BM25 saturates far below).
    tf: [u8; 3],
}

#[derive(Debug)]
struct Doc {
    source: String,
    title: String,
    lens: [u32; 3],
}

#[derive(Debug)]
struct Chunk {
    doc: u32,
    /// Range of this passage's body terms, in order, in `Index::sequence`.
    seq: (u32, u32),
    heading: String,
    text: String,
    lens: [u32; 3],
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Document path relative to the root, with forward slashes.
    pub source: String,
    /// The document's title.
    pub title: String,
    /// Heading path of the passage's section ("Guide › Install"); may be empty.
    pub heading: String,
    /// The passage text.
    pub passage: String,
    /// Relevance; higher is better. Comparable within one query only.
    pub score: f32,
}

/// Counts describing a built index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Documents indexed.
    pub documents: usize,
    /// Passages indexed.
    pub passages: usize,
    /// Distinct terms.
    pub terms: usize,
    /// Bytes of source text indexed.
    pub text_bytes: usize,
}

/// An inverted index over passages and documents.
pub struct Index {
    analyzer: Analyzer,
    opts: Options,
    docs: Vec<Doc>,
    chunks: Vec<Chunk>,
    vocab: FxHashMap<String, u32>,
    chunk_postings: Vec<Vec<Posting>>,
    doc_postings: Vec<Vec<Posting>>,
    chunk_avg: [f32; 3],
    doc_avg: [f32; 3],
    text_bytes: usize,
    /// Body term ids of every passage, in text order (for proximity).
    sequence: Vec<u32>,
    /// The model and the passages' dense vectors (hybrid retrieval), when enabled.
    dense: Option<Dense>,
}

/// The dense side of a hybrid index.
struct Dense {
    model: Arc<dense::Model>,
    vectors: dense::Vectors,
}

/// Documents taken from each ranking into the fusion.
const FUSION_DEPTH: usize = 100;

/// Documents the window re-ranking looks at (`Options::window_rerank`).
const RERANK_DOCS: usize = 10;

/// Window re-ranking of a hybrid index, chosen on the tuning corpus by its
/// criterion (hybrid MRR@3: 0.856 at 20 words × 1.5, against 0.847 without;
/// see `eval/README.md`).
pub const WINDOW_RERANK: f32 = 1.5;
/// Words of a re-ranking window (see [`WINDOW_RERANK`]).
pub const WINDOW_WORDS: usize = 20;

/// Term ids during a build: the stemmed vocabulary, and a cache from raw
/// token to term id so that each distinct word is stemmed once.
struct Terms {
    analyzer: Analyzer,
    vocab: FxHashMap<String, u32>,
    /// Raw token -> term id, `None` for stop words.
    cache: FxHashMap<String, Option<u32>>,
}

impl Terms {
    fn id(&mut self, token: &str) -> Option<u32> {
        if let Some(id) = self.cache.get(token) {
            return *id;
        }
        let id = if is_stop_word(token) {
            None
        } else {
            let stem = self.analyzer.stem(token);
            let next = u32::try_from(self.vocab.len()).unwrap_or(u32::MAX);
            Some(match self.vocab.get(stem.as_ref()) {
                Some(id) => *id,
                None => {
                    self.vocab.insert(stem.into_owned(), next);
                    next
                }
            })
        };
        self.cache.insert(token.to_owned(), id);
        id
    }
}

/// Per-field term counts for one unit (a passage or a document).
#[derive(Default)]
struct Counter {
    counts: FxHashMap<u32, [u8; 3]>,
    lens: [u32; 3],
    /// When set, body term ids are appended here in order.
    sequence: Option<Vec<u32>>,
}

impl Counter {
    fn add(&mut self, terms: &mut Terms, field: usize, text: &str) {
        for token in raw_tokens(text) {
            let Some(id) = terms.id(&token) else { continue };
            if field == BODY
                && let Some(seq) = &mut self.sequence
            {
                seq.push(id);
            }
            let tf = self.counts.entry(id).or_default();
            tf[field] = tf[field].saturating_add(1);
            self.lens[field] += 1;
        }
    }

    /// Moves the counts into `postings` under `id`; returns the field lengths.
    fn drain_into(&mut self, postings: &mut Vec<Vec<Posting>>, id: u32) -> [u32; 3] {
        for (term, tf) in self.counts.drain() {
            let t = term as usize;
            if postings.len() <= t {
                postings.resize_with(t + 1, Vec::new);
            }
            postings[t].push(Posting { id, tf });
        }
        std::mem::take(&mut self.lens)
    }
}

impl Index {
    /// Builds an index from `(relative path, text)` pairs. Files whose
    /// extension is not Markdown, text or HTML are ignored. With
    /// `opts.dense_model`, vectors come from (and go to) the process's
    /// in-memory cache.
    ///
    /// # Panics
    /// If `opts.dense_model` names a file that is not a model: this is for
    /// tests and tools; the component loads the model itself and calls
    /// [`Index::build_with`].
    pub fn build<I, P, T>(files: I, opts: Options) -> Index
    where
        I: IntoIterator<Item = (P, T)>,
        P: AsRef<str>,
        T: AsRef<str>,
    {
        let model = opts.dense_model.as_deref().map(|p| dense::load(p).unwrap_or_else(|e| panic!("{e}")));
        let mut cache = crate::cache::process_cache().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Index::build_with(files, opts, model.map(|m| (m, &mut *cache as &mut dyn dense::VectorCache)))
    }

    /// [`Index::build`] with the dense model already loaded and the vector
    /// cache to use; `dense = None` (or `dense_weight` 0) builds a lexical index.
    pub fn build_with<I, P, T>(files: I, opts: Options, dense: Option<(Arc<dense::Model>, &mut dyn dense::VectorCache)>) -> Index
    where
        I: IntoIterator<Item = (P, T)>,
        P: AsRef<str>,
        T: AsRef<str>,
    {
        let mut terms = Terms { analyzer: Analyzer::default(), vocab: FxHashMap::default(), cache: FxHashMap::default() };
        let mut docs = Vec::new();
        let mut chunks = Vec::new();
        let mut chunk_postings = Vec::new();
        let mut doc_postings = Vec::new();
        let mut text_bytes = 0;
        let mut doc_counter = Counter::default();
        let mut chunk_counter = Counter { sequence: Some(Vec::new()), ..Counter::default() };
        for (path, text) in files {
            let (path, text) = (path.as_ref(), text.as_ref());
            let Some(parsed) = extract::parse(path, text) else { continue };
            if parsed.sections.is_empty() {
                continue;
            }
            text_bytes += text.len();
            let doc_id = u32::try_from(docs.len()).unwrap_or(u32::MAX);
            doc_counter.add(&mut terms, TITLE, &parsed.title);
            for section in &parsed.sections {
                let leaf = section.heading.rsplit(" › ").next().unwrap_or("");
                if leaf != parsed.title {
                    doc_counter.add(&mut terms, HEADING, leaf);
                }
                doc_counter.add(&mut terms, BODY, &section.text);
                for (a, b) in chunk::split(&section.text, opts.chunk_words, opts.overlap_words) {
                    let passage = &section.text[a..b];
                    let seq_start = chunk_counter.sequence.as_ref().map_or(0, Vec::len);
                    chunk_counter.add(&mut terms, TITLE, &parsed.title);
                    chunk_counter.add(&mut terms, HEADING, &section.heading);
                    chunk_counter.add(&mut terms, BODY, passage);
                    let chunk_id = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
                    let lens = chunk_counter.drain_into(&mut chunk_postings, chunk_id);
                    let seq_end = chunk_counter.sequence.as_ref().map_or(0, Vec::len);
                    let seq = (u32::try_from(seq_start).unwrap_or(u32::MAX), u32::try_from(seq_end).unwrap_or(u32::MAX));
                    chunks.push(Chunk { doc: doc_id, seq, heading: section.heading.clone(), text: passage.to_owned(), lens });
                }
            }
            let lens = doc_counter.drain_into(&mut doc_postings, doc_id);
            docs.push(Doc { source: path.to_owned(), title: parsed.title, lens });
        }
        let Terms { analyzer, vocab, .. } = terms;
        chunk_postings.resize_with(vocab.len(), Vec::new);
        doc_postings.resize_with(vocab.len(), Vec::new);
        for p in chunk_postings.iter_mut().chain(doc_postings.iter_mut()) {
            p.shrink_to_fit();
        }
        let chunk_avg = averages(chunks.iter().map(|c| c.lens));
        let doc_avg = averages(docs.iter().map(|d| d.lens));
        let mut sequence = chunk_counter.sequence.take().unwrap_or_default();
        sequence.shrink_to_fit();
        let dense = dense.filter(|_| opts.dense_weight > 0.0).map(|(model, cache)| {
            let vectors = dense::Vectors::build(
                &model,
                chunks.len(),
                |i, out| {
                    let c: &Chunk = &chunks[i];
                    out.push_str(&docs[c.doc as usize].title);
                    out.push('\n');
                    out.push_str(&c.heading);
                    out.push('\n');
                    out.push_str(&c.text);
                },
                cache,
            );
            Dense { model, vectors }
        });
        Index { analyzer, opts, docs, chunks, vocab, chunk_postings, doc_postings, chunk_avg, doc_avg, text_bytes, sequence, dense }
    }

    /// The passages' dense vectors, in passage order, if the index has them.
    pub fn vectors(&self) -> Option<&dense::Vectors> {
        self.dense.as_ref().map(|d| &d.vectors)
    }

    /// Counts describing the index.
    pub fn stats(&self) -> Stats {
        Stats { documents: self.docs.len(), passages: self.chunks.len(), terms: self.vocab.len(), text_bytes: self.text_bytes }
    }

    /// Approximate heap bytes held by the index (strings, postings, vocabulary).
    pub fn memory_bytes(&self) -> usize {
        let posting = std::mem::size_of::<Posting>();
        let lists = |ps: &Vec<Vec<Posting>>| {
            ps.capacity() * std::mem::size_of::<Vec<Posting>>() + ps.iter().map(|p| p.capacity() * posting).sum::<usize>()
        };
        let docs: usize = self.docs.capacity() * std::mem::size_of::<Doc>()
            + self.docs.iter().map(|d| d.source.capacity() + d.title.capacity()).sum::<usize>();
        let chunks: usize = self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.chunks.iter().map(|c| c.heading.capacity() + c.text.capacity()).sum::<usize>();
        // hashbrown: one control byte plus the entry per bucket, buckets ≈ capacity * 8/7.
        let vocab = self.vocab.capacity() * 8 / 7 * (std::mem::size_of::<(String, u32)>() + 1)
            + self.vocab.keys().map(String::capacity).sum::<usize>();
        lists(&self.chunk_postings)
            + lists(&self.doc_postings)
            + docs
            + chunks
            + vocab
            + self.sequence.capacity() * 4
            + self.dense.as_ref().map_or(0, |d| d.vectors.memory_bytes())
    }

    /// Up to `k` passages for `query`, best first, distinct documents first.
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        self.search_filtered(query, k, |_| true)
    }

    /// Like [`Index::search`], over documents whose source passes `keep`.
    pub fn search_filtered(&self, query: &str, k: usize, keep: impl Fn(&str) -> bool) -> Vec<Hit> {
        if k == 0 || self.chunks.is_empty() {
            return Vec::new();
        }
        // Filter verdict per document: 0 = not asked, 1 = keep, 2 = drop.
        let mut allowed: Vec<u8> = vec![0; self.docs.len()];
        let mut keep_doc = |doc: u32| {
            let verdict = &mut allowed[doc as usize];
            if *verdict == 0 {
                *verdict = if keep(&self.docs[doc as usize].source) { 1 } else { 2 };
            }
            *verdict == 1
        };
        if self.dense.is_some() {
            return self.search_hybrid(query, k, &mut keep_doc);
        }
        let Some((firsts, scored)) = self.lexical(query, &mut keep_doc) else { return Vec::new() };
        self.pick(firsts, scored, k)
    }

    /// Hybrid: the lexical and the dense document rankings fused (linearly
    /// by default, see [`Options::rrf_k`]); each document is represented by
    /// its best lexical passage (its best dense one if only the dense ranking
    /// found it); the first fused documents are then re-ranked by their best
    /// short window ([`Options::window_rerank`]).
    /// Results are distinct documents. A query with no word but stop words
    /// finds nothing, as in lexical search; a query whose words are all
    /// unknown to the index may still find documents through the dense side.
    fn search_hybrid(&self, query: &str, k: usize, keep_doc: &mut dyn FnMut(u32) -> bool) -> Vec<Hit> {
        let o = &self.opts;
        if self.analyzer.terms(query).next().is_none() {
            return Vec::new();
        }
        let Some(Dense { model, .. }) = &self.dense else { return Vec::new() };
        let mut lexical =
            if o.lexical_weight > 0.0 { self.lexical(query, keep_doc).map(|(f, _)| f).unwrap_or_default() } else { Vec::new() };
        top_k(&mut lexical, FUSION_DEPTH);
        let mut ids = Vec::new();
        dense::Tokenizer::new(model).tokens(query, &mut ids);
        let mut q = vec![0f32; model.dims()];
        dense::embed_into(model, &ids, &mut q);
        let first_q = q.clone();
        let best_dense = self.dense_scan(&q, keep_doc);
        let mut fused = self.fuse(&lexical, &best_dense);
        if o.dense_feedback > 0.0 && o.feedback_docs > 0 {
            // Pseudo-relevance feedback on the dense side: the query vector
            // moves towards the best passages of the first fused documents,
            // then the passages are scanned again.
            let mut top: Vec<(f32, u32)> = fused.iter().map(|(doc, (score, _))| (*score, *doc)).collect();
            top_k(&mut top, o.feedback_docs);
            let share = o.dense_feedback / top.len().max(1) as f32;
            let mut moved = false;
            for &(_, doc) in &top {
                let (_, c) = best_dense[doc as usize];
                if c == u32::MAX {
                    continue;
                }
                if let Some(Dense { vectors, .. }) = &self.dense {
                    let (row, scale) = vectors.row(c as usize);
                    for (a, &r) in q.iter_mut().zip(row) {
                        *a += share * f32::from(r) * scale;
                    }
                    moved = true;
                }
            }
            if moved {
                let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    q.iter_mut().for_each(|x| *x /= norm);
                }
                fused = self.fuse(&lexical, &self.dense_scan(&q, keep_doc));
            }
        }
        if o.window_rerank > 0.0 && o.window_words > 0 {
            self.rerank_windows(&first_q, &mut fused, &best_dense);
        }
        let mut picked: Vec<(f32, u32)> = fused.into_values().collect();
        top_k(&mut picked, k);
        picked.into_iter().map(|(score, c)| self.hit(c, score)).collect()
    }

    /// Re-ranking of the first fused documents: each gains `window_rerank` ×
    /// the best cosine between the query and a window of `window_words` words
    /// (stride half a window) of its best dense passage, title and headings
    /// in front, embedded at query time.
    fn rerank_windows(&self, q: &[f32], fused: &mut FxHashMap<u32, (f32, u32)>, best_dense: &[(f32, u32)]) {
        let o = &self.opts;
        let Some(Dense { model, .. }) = &self.dense else { return };
        let mut top: Vec<(f32, u32)> = fused.iter().map(|(doc, (score, _))| (*score, *doc)).collect();
        top_k(&mut top, RERANK_DOCS);
        let mut tok = dense::Tokenizer::new(model);
        let (mut ids, mut v, mut text) = (Vec::new(), vec![0f32; model.dims()], String::new());
        for (_, doc) in top {
            let (_, c) = best_dense[doc as usize];
            let Some(chunk) = self.chunks.get(c as usize) else { continue };
            let words: Vec<&str> = chunk.text.split_whitespace().collect();
            let stride = (o.window_words / 2).max(1);
            let mut best = f32::NEG_INFINITY;
            let mut start = 0;
            loop {
                let end = (start + o.window_words).min(words.len());
                text.clear();
                text.push_str(&self.docs[doc as usize].title);
                text.push('\n');
                text.push_str(&chunk.heading);
                text.push('\n');
                text.push_str(&words[start..end].join(" "));
                ids.clear();
                tok.tokens(&text, &mut ids);
                dense::embed_into(model, &ids, &mut v);
                best = best.max(v.iter().zip(q).map(|(a, b)| a * b).sum());
                if end >= words.len() {
                    break;
                }
                start += stride;
            }
            if let Some(e) = fused.get_mut(&doc)
                && best.is_finite()
            {
                e.0 += o.window_rerank * best;
            }
        }
    }

    /// Each document's best passage by cosine with unit vector `q`: (cosine,
    /// passage), `(-inf, u32::MAX)` for a document with none (or filtered out).
    fn dense_scan(&self, q: &[f32], keep_doc: &mut dyn FnMut(u32) -> bool) -> Vec<(f32, u32)> {
        let mut best: Vec<(f32, u32)> = vec![(f32::NEG_INFINITY, u32::MAX); self.docs.len()];
        let Some(Dense { vectors, .. }) = &self.dense else { return best };
        let (q, q_scale) = dense::quantise(q);
        if q_scale > 0.0 {
            for (c, chunk) in self.chunks.iter().enumerate() {
                let c = c as u32;
                let e = &mut best[chunk.doc as usize];
                let s = vectors.dot(&q, q_scale, c as usize);
                if (e.1 == u32::MAX || better((s, c), *e)) && keep_doc(chunk.doc) {
                    *e = (s, c);
                }
            }
        }
        best
    }

    /// The fused document scores: doc -> (score, representative passage).
    fn fuse(&self, lexical: &[(f32, u32)], best_dense: &[(f32, u32)]) -> FxHashMap<u32, (f32, u32)> {
        let o = &self.opts;
        let mut dense: Vec<(f32, u32)> = best_dense.iter().copied().filter(|e| e.1 != u32::MAX).collect();
        top_k(&mut dense, FUSION_DEPTH);
        let mut fused: FxHashMap<u32, (f32, u32)> = FxHashMap::default();
        if o.rrf_k > 0.0 {
            for (weight, list) in [(o.lexical_weight, lexical), (o.dense_weight, &dense[..])] {
                for (rank, &(_, c)) in list.iter().enumerate() {
                    let e = fused.entry(self.chunks[c as usize].doc).or_insert((0.0, c));
                    e.0 += weight / (o.rrf_k + rank as f32 + 1.0);
                }
            }
        } else if o.min_max_fusion {
            // Each ranking's scores spread over [0, 1] between its best and
            // its last of the fusion depth; a document out of a ranking's
            // depth gets 0 from it.
            let span = |l: &[(f32, u32)]| {
                let hi = l.first().map_or(1.0, |f| f.0);
                let lo = l.last().map_or(0.0, |f| f.0);
                (lo, (hi - lo).max(f32::MIN_POSITIVE))
            };
            let (llo, lspan) = span(lexical);
            for &(s, c) in lexical {
                fused.insert(self.chunks[c as usize].doc, (o.lexical_weight * (s - llo) / lspan, c));
            }
            let (dlo, dspan) = span(&dense);
            for &(s, c) in &dense {
                fused.entry(self.chunks[c as usize].doc).or_insert((0.0, c)).0 += o.dense_weight * (s - dlo) / dspan;
            }
        } else {
            let top = lexical.first().map_or(1.0, |f| f.0.max(f32::MIN_POSITIVE));
            for &(s, c) in lexical {
                fused.insert(self.chunks[c as usize].doc, (o.lexical_weight * s / top, c));
            }
            for &(_, c) in &dense {
                fused.entry(self.chunks[c as usize].doc).or_insert((0.0, c));
            }
            for (doc, e) in &mut fused {
                let (s, _) = best_dense[*doc as usize];
                if s.is_finite() {
                    e.0 += o.dense_weight * s;
                }
            }
        }
        fused
    }

    /// Lexical scores: the best passage of every matching document (with its
    /// final score), and every scored passage; `None` if no query term is known.
    #[allow(clippy::type_complexity)]
    fn lexical(&self, query: &str, keep_doc: &mut dyn FnMut(u32) -> bool) -> Option<(Vec<(f32, u32)>, Vec<(f32, u32)>)> {
        // Query terms in order; an unknown term breaks adjacency.
        let in_order: Vec<Option<u32>> = self.analyzer.terms(query).map(|t| self.vocab.get(&t).copied()).collect();
        let mut pairs: Vec<(u32, u32)> = in_order
            .windows(2)
            .filter_map(|w| match (w[0], w[1]) {
                (Some(a), Some(b)) if a != b => Some((a, b)),
                _ => None,
            })
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut terms: Vec<u32> = in_order.into_iter().flatten().collect();
        terms.sort_unstable();
        terms.dedup();
        if terms.is_empty() {
            return None;
        }
        let o = &self.opts;
        let weights = [o.title_weight, o.heading_weight, 1.0];
        let mut doc_scores = vec![0f32; self.docs.len()];
        for &t in &terms {
            let postings = &self.doc_postings[t as usize];
            let idf = idf(self.docs.len(), postings.len());
            for p in postings {
                let d = &self.docs[p.id as usize];
                doc_scores[p.id as usize] += idf * saturate(p.tf, d.lens, self.doc_avg, weights, o.b, o.k1);
            }
        }
        let mut chunk_scores = vec![0f32; self.chunks.len()];
        let mut touched = Vec::new();
        let mut idfs: HashMap<u32, f32> = HashMap::new();
        for &t in &terms {
            let postings = &self.chunk_postings[t as usize];
            let idf = idf(self.chunks.len(), postings.len());
            idfs.insert(t, idf);
            for p in postings {
                let c = &self.chunks[p.id as usize];
                let s = &mut chunk_scores[p.id as usize];
                if *s == 0.0 {
                    touched.push(p.id);
                }
                *s += idf * saturate(p.tf, c.lens, self.chunk_avg, weights, o.b, o.k1);
            }
        }
        // Final passage scores; the best passage of each document.
        // Dense per-document state: best (score, passage), u32::MAX = none yet.
        let mut best: Vec<(f32, u32)> = vec![(0.0, u32::MAX); self.docs.len()];
        let mut docs_hit: Vec<u32> = Vec::new();
        let mut scored: Vec<(f32, u32)> = Vec::with_capacity(touched.len());
        for &c in &touched {
            let doc = self.chunks[c as usize].doc;
            if !keep_doc(doc) {
                continue;
            }
            let s = chunk_scores[c as usize] + o.document_weight * doc_scores[doc as usize];
            scored.push((s, c));
            let e = &mut best[doc as usize];
            if e.1 == u32::MAX {
                docs_hit.push(doc);
                *e = (s, c);
            } else if better((s, c), *e) {
                *e = (s, c);
            }
        }
        // Each further passage of a document counts SAME_DOC_DECAY times less
        // than the one before it, so distinct documents come first unless a
        // second passage is much better than another document's best.
        if !pairs.is_empty() && o.proximity_weight > 0.0 {
            let m = RERANK.min(scored.len());
            if m > 0 && m < scored.len() {
                scored.select_nth_unstable_by(m - 1, order);
            }
            for (s, c) in &mut scored[..m] {
                *s += o.proximity_weight * self.proximity(*c, &pairs, &idfs);
                let e = &mut best[self.chunks[*c as usize].doc as usize];
                if better((*s, *c), *e) {
                    *e = (*s, *c);
                }
            }
        }
        let firsts: Vec<(f32, u32)> = docs_hit.iter().map(|&d| best[d as usize]).collect();
        Some((firsts, scored))
    }

    /// The lexical result list: documents' best passages first, then further
    /// passages with their decay.
    fn pick(&self, mut firsts: Vec<(f32, u32)>, scored: Vec<(f32, u32)>, k: usize) -> Vec<Hit> {
        top_k(&mut firsts, k);
        let threshold = if firsts.len() < k { 0.0 } else { firsts.last().map_or(0.0, |f| f.0) };
        let chosen: std::collections::HashSet<u32> = firsts.iter().map(|(_, c)| *c).collect();
        let mut more: Vec<(f32, u32)> =
            scored.into_iter().filter(|(s, c)| s * SAME_DOC_DECAY >= threshold && !chosen.contains(c)).collect();
        more.sort_unstable_by(order);
        let mut seen: HashMap<u32, i32> = HashMap::new();
        let mut picked = firsts;
        for (s, c) in more {
            let n = seen.entry(self.chunks[c as usize].doc).or_insert(0);
            *n += 1;
            picked.push((s * SAME_DOC_DECAY.powi(*n), c));
        }
        top_k(&mut picked, k);
        picked.into_iter().map(|(score, c)| self.hit(c, score)).collect()
    }

    /// BM25-saturated count of query pairs that occur near each other in
    /// passage `c`, weighted by the mean idf of the pair.
    fn proximity(&self, c: u32, pairs: &[(u32, u32)], idfs: &HashMap<u32, f32>) -> f32 {
        let (a, b) = self.chunks[c as usize].seq;
        let seq = &self.sequence[a as usize..b as usize];
        let k1 = self.opts.k1;
        let mut bonus = 0.0;
        for &(x, y) in pairs {
            let mut n = 0u32;
            for (i, &t) in seq.iter().enumerate() {
                let other = if t == x {
                    y
                } else if t == y {
                    x
                } else {
                    continue;
                };
                if seq[i + 1..(i + 1 + PROXIMITY_WINDOW).min(seq.len())].contains(&other) {
                    n += 1;
                }
            }
            if n > 0 {
                let w = (idfs.get(&x).copied().unwrap_or(0.0) + idfs.get(&y).copied().unwrap_or(0.0)) / 2.0;
                let n = n as f32;
                bonus += w * n * (k1 + 1.0) / (n + k1);
            }
        }
        bonus
    }

    fn hit(&self, c: u32, score: f32) -> Hit {
        let chunk = &self.chunks[c as usize];
        let doc = &self.docs[chunk.doc as usize];
        Hit { source: doc.source.clone(), title: doc.title.clone(), heading: chunk.heading.clone(), passage: chunk.text.clone(), score }
    }
}

/// Higher score first; equal scores by lower id, so results are deterministic.
fn better(a: (f32, u32), b: (f32, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

fn order(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Keeps the `k` best of `v`, sorted best first.
fn top_k(v: &mut Vec<(f32, u32)>, k: usize) {
    if v.len() > k && k > 0 {
        v.select_nth_unstable_by(k - 1, order);
        v.truncate(k);
    }
    v.sort_unstable_by(order);
    v.truncate(k);
}

fn idf(n: usize, df: usize) -> f32 {
    let (n, df) = (n as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25F: per-field length-normalised weighted frequencies, summed, saturated.
fn saturate(tf: [u8; 3], lens: [u32; 3], avg: [f32; 3], w: [f32; 3], b: f32, k1: f32) -> f32 {
    let mut x = 0.0;
    for f in 0..3 {
        if tf[f] > 0 {
            let norm = if avg[f] > 0.0 { 1.0 - b + b * lens[f] as f32 / avg[f] } else { 1.0 };
            x += w[f] * f32::from(tf[f]) / norm;
        }
    }
    x * (k1 + 1.0) / (k1 + x)
}

fn averages(lens: impl Iterator<Item = [u32; 3]>) -> [f32; 3] {
    let mut sum = [0f64; 3];
    let mut n = 0f64;
    for l in lens {
        for f in 0..3 {
            sum[f] += f64::from(l[f]);
        }
        n += 1.0;
    }
    if n == 0.0 { [0.0; 3] } else { sum.map(|s| (s / n) as f32) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<(&'static str, &'static str)> {
        vec![
            (
                "guide/failover.md",
                "# Failover\n\nWhen a model fails, the gateway tries the next model in the chain.\n\n## Triggers\n\nTimeouts, server errors and rate limits trigger failover.",
            ),
            ("guide/limits.md", "# Rate limits\n\nEach key may send 60 requests per minute. A rate limit returns 429."),
            ("notes.txt", "Misc notes\n==========\n\nThe chain of models is configured per request. Failover is mentioned here once."),
            (
                "web/shield.html",
                "<html><head><title>Prompt Shield</title></head><body><h1>Prompt Shield</h1><p>Detects prompt injection in user input and retrieved passages.</p></body></html>",
            ),
            ("image.png", "\u{89}PNG"),
        ]
    }

    /// Lexical-only options (the default: no model, no vectors).
    fn lexical() -> Options {
        Options::default()
    }

    /// Hybrid options with the shipped model (passages as the lexical tests' ones).
    fn hybrid() -> Options {
        Options { chunk_words: Options::default().chunk_words, ..Options::hybrid(dense::SHIPPED_MODEL) }
    }

    #[test]
    fn hybrid_results_are_distinct_documents_and_filtered() {
        let idx = Index::build(corpus(), hybrid());
        let hits = idx.search("failover", 10);
        let mut sources: Vec<&str> = hits.iter().map(|h| h.source.as_str()).collect();
        assert_eq!(hits[0].source, "guide/failover.md");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{hits:?}");
        sources.sort_unstable();
        sources.dedup();
        assert_eq!(sources.len(), hits.len(), "{hits:?}");
        let only = idx.search_filtered("failover", 10, |s| s.starts_with("web/"));
        assert!(!only.is_empty() && only.iter().all(|h| h.source.starts_with("web/")), "{only:?}");
    }

    #[test]
    fn ranks_the_page_about_the_query_first() {
        let idx = Index::build(corpus(), Options::default());
        assert_eq!(idx.stats().documents, 4);
        let hits = idx.search("what triggers a failover?", 3);
        assert_eq!(hits[0].source, "guide/failover.md");
        assert_eq!(hits[0].heading, "Failover › Triggers");
        assert_eq!(hits.len(), 3);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{hits:?}");
        assert_eq!(idx.search("rate limiting", 1)[0].source, "guide/limits.md");
        assert_eq!(idx.search("injection detection", 1)[0].source, "web/shield.html");
    }

    #[test]
    fn nearby_query_terms_rank_higher() {
        let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed eiusmod tempor incididunt labore dolore magna";
        let files = vec![
            ("apart.md".to_string(), format!("# One\n\nexclusive {filler} bitwise {filler}")),
            ("near.md".to_string(), format!("# Two\n\n{filler} bitwise exclusive {filler}")),
        ];
        let idx = Index::build(files.clone(), lexical());
        assert_eq!(idx.search("bitwise exclusive", 1)[0].source, "near.md");
        let flat = Index::build(files, Options { proximity_weight: 0.0, ..lexical() });
        let hits = flat.search("bitwise exclusive", 2);
        assert!((hits[0].score - hits[1].score).abs() < 1e-6, "{hits:?}");
    }

    #[test]
    fn fills_with_more_passages_of_the_same_document() {
        let idx = Index::build(corpus(), lexical());
        let hits = idx.search("failover", 10);
        assert_eq!(hits.len(), 3, "{hits:?}");
        assert_eq!(hits.iter().filter(|h| h.source == "guide/failover.md").count(), 2);
        assert_eq!(hits[0].source, "guide/failover.md");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{hits:?}");
    }

    #[test]
    fn distinct_documents_come_first_when_close() {
        let para = |w: &str| format!("{w} alpha beta gamma delta epsilon.\n\n");
        let a: String = (0..6).map(|_| para("kiwi")).collect();
        let files = vec![("a.md".to_string(), format!("# A\n\n{a}")), ("b.md".to_string(), format!("# B\n\n{}", para("kiwi")))];
        let idx = Index::build(files, Options { chunk_words: 8, overlap_words: 0, ..Options::default() });
        let hits = idx.search("kiwi", 3);
        let sources: Vec<_> = hits.iter().map(|h| h.source.as_str()).collect();
        assert_eq!(sources[..2].iter().filter(|s| **s == "a.md").count(), 1, "{hits:?}");
        assert!(sources[..2].contains(&"b.md"));
    }

    #[test]
    fn empty_and_unknown_queries_find_nothing() {
        let idx = Index::build(corpus(), lexical());
        assert!(idx.search("", 5).is_empty());
        assert!(idx.search("the of and", 5).is_empty());
        assert!(idx.search("zyzzyva", 5).is_empty());
        assert!(idx.search("failover", 0).is_empty());
        let hybrid = Index::build(corpus(), hybrid());
        assert!(hybrid.search("", 5).is_empty());
        assert!(hybrid.search("the of and", 5).is_empty());
        assert!(hybrid.search("failover", 0).is_empty());
        let empty = Index::build(Vec::<(String, String)>::new(), Options::default());
        assert!(empty.search("failover", 5).is_empty());
    }

    #[test]
    fn filter_limits_sources() {
        let idx = Index::build(corpus(), Options::default());
        let hits = idx.search_filtered("failover chain", 5, |s| s.starts_with("notes"));
        assert_eq!(hits.iter().map(|h| h.source.as_str()).collect::<Vec<_>>(), ["notes.txt"]);
    }

    #[test]
    fn memory_estimate_covers_the_text() {
        let idx = Index::build(corpus(), Options::default());
        assert!(idx.memory_bytes() > idx.stats().text_bytes / 2);
    }
}
