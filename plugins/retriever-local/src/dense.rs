//! Dense vectors from static token embeddings distilled from
//! all-MiniLM-L6-v2 (see `model/README.md`).
//!
//! The model file holds one int8 vector (with an f32 scale) per WordPiece
//! token: the model's input token embeddings, reduced by PCA. A text's vector
//! is the sum of its tokens' vectors weighted by [`token_weight`] (an inverse
//! frequency read from the vocabulary's order, not counted over the corpus),
//! normalised: it depends on the model file and the text alone, so it can be
//! cached ([`crate::cache`]). No transformer runs at query time: embedding a
//! query is a tokenisation and a weighted sum. The model is read from a file
//! at run time ([`load`]), only for an index that names one.
//!
//! Tokenisation follows BERT's uncased tokenizer: lower-case, split on
//! whitespace and punctuation, greedy longest-match WordPiece with `##`
//! continuations, `[UNK]` for a word it cannot split. Not done: stripping
//! accents (an accented word is split differently) and splitting CJK
//! characters apart.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

/// The model file in this repository (format: `model/README.md`). The
/// component does not embed it: an index that asks for dense retrieval names
/// a copy of it (`dense_model`), which the host mounts read-only.
pub const SHIPPED_MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/model/minilm-static.bin");

/// Static token embeddings.
pub struct Model {
    /// The whole model file; the int8 rows are read in place from it.
    bytes: Vec<u8>,
    vocab: FxHashMap<Box<str>, u32>,
    dims: usize,
    /// Per-token dequantisation scale.
    scales: Vec<f32>,
    /// Offset of the `vocab.len() x dims` int8 rows in `bytes`.
    rows_at: usize,
    unk: u32,
    /// Hash of the file's bytes: part of every cached vector's key.
    hash: u64,
}

/// The model at `path`, read and parsed once per process (an instance of the
/// component is one process): indexes that name the same file share it.
pub fn load(path: &str) -> Result<Arc<Model>, String> {
    static LOADED: Mutex<Vec<(String, Arc<Model>)>> = Mutex::new(Vec::new());
    let mut loaded = LOADED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, m)) = loaded.iter().find(|(p, _)| p == path) {
        return Ok(m.clone());
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the dense model {path}: {e}"))?;
    let model = Arc::new(Model::parse(bytes).map_err(|e| format!("dense model {path}: {e}"))?);
    loaded.push((path.to_owned(), model.clone()));
    Ok(model)
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Model({} tokens x {} dims, hash {:016x})", self.scales.len(), self.dims, self.hash)
    }
}

impl Model {
    /// Parses a model file (the vectors stay in `b`).
    pub fn parse(b: Vec<u8>) -> Result<Model, String> {
        let u32_at = |i: usize| -> Result<u32, String> {
            b.get(i..i + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]])).ok_or_else(|| "model file truncated".to_string())
        };
        if b.get(..4) != Some(b"GHSE") || u32_at(4)? != 1 {
            return Err("not a GHSE v1 model file".into());
        }
        let (n, dims) = (u32_at(8)? as usize, u32_at(12)? as usize);
        if dims == 0 || dims % 16 != 0 {
            return Err(format!("model dimensions must be a positive multiple of 16, got {dims}"));
        }
        let mut at = 16;
        let mut vocab = FxHashMap::default();
        for id in 0..n {
            let len = *b.get(at).ok_or("model file truncated")? as usize;
            let word = std::str::from_utf8(b.get(at + 1..at + 1 + len).ok_or("model file truncated")?).map_err(|e| e.to_string())?;
            vocab.insert(word.into(), id as u32);
            at += 1 + len;
        }
        let mut scales = Vec::with_capacity(n);
        for i in 0..n {
            scales.push(f32::from_bits(u32_at(at + 4 * i)?));
        }
        at += 4 * n;
        if b.len() < at + n * dims {
            return Err("model file truncated".into());
        }
        if at + n * dims != b.len() {
            return Err("model file has trailing bytes".into());
        }
        let unk = *vocab.get("[UNK]").ok_or("model vocabulary has no [UNK]")?;
        let hash = fnv64(FNV_OFFSET, &b);
        Ok(Model { bytes: b, vocab, dims, scales, rows_at: at, unk, hash })
    }

    /// Hash of the model file.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Vector dimensions.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Tokens in the vocabulary.
    pub fn vocab_len(&self) -> usize {
        self.scales.len()
    }

    /// Adds `weight` times token `id`'s vector to `acc`.
    pub fn add_token(&self, id: u32, weight: f32, acc: &mut [f32]) {
        let i = id as usize;
        let w = weight * self.scales[i];
        let at = self.rows_at + i * self.dims;
        axpy_i8(w, &self.bytes[at..at + self.dims], acc);
    }

    /// WordPiece ids of one lower-cased word (no whitespace or punctuation).
    pub fn word_pieces(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > 100 {
            out.push(self.unk);
            return;
        }
        let start_len = out.len();
        let mut start = 0;
        let mut key = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                if word.is_char_boundary(end) {
                    key.clear();
                    if start > 0 {
                        key.push_str("##");
                    }
                    key.push_str(&word[start..end]);
                    if let Some(&id) = self.vocab.get(key.as_str()) {
                        found = Some(id);
                        break;
                    }
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(start_len);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }

    /// Calls `f` with each word and punctuation mark of `text`, lower-cased, as
    /// BERT's basic tokenizer splits it.
    pub fn words(text: &str, mut f: impl FnMut(&str)) {
        let mut word = String::new();
        let flush = |w: &mut String, f: &mut dyn FnMut(&str)| {
            if !w.is_empty() {
                f(w);
                w.clear();
            }
        };
        for c in text.chars() {
            if c.is_whitespace() || c.is_control() {
                flush(&mut word, &mut f);
            } else if c.is_alphanumeric() {
                word.extend(c.to_lowercase());
            } else {
                flush(&mut word, &mut f);
                let mut buf = [0u8; 4];
                f(c.encode_utf8(&mut buf));
            }
        }
        flush(&mut word, &mut f);
    }
}

/// Token ids of texts, with a per-word cache (a corpus repeats its words).
pub struct Tokenizer<'m> {
    model: &'m Model,
    cache: FxHashMap<String, Box<[u32]>>,
}

impl<'m> Tokenizer<'m> {
    /// A tokenizer with an empty cache.
    pub fn new(model: &'m Model) -> Self {
        Tokenizer { model, cache: FxHashMap::default() }
    }

    /// Appends the token ids of `text` to `out`.
    pub fn tokens(&mut self, text: &str, out: &mut Vec<u32>) {
        let (model, cache) = (self.model, &mut self.cache);
        Model::words(text, |w| {
            if let Some(ids) = cache.get(w) {
                out.extend_from_slice(ids);
                return;
            }
            let mut ids = Vec::new();
            model.word_pieces(w, &mut ids);
            out.extend_from_slice(&ids);
            if cache.len() < 1 << 20 {
                cache.insert(w.to_owned(), ids.into_boxed_slice());
            }
        });
    }
}

/// A token's weight in a text's vector. BERT's WordPiece vocabulary lists
/// whole words from id 1996 on roughly by falling frequency ("the", "of",
/// "and"…), so the rank r = id - 1995 stands for a frequency of about 1/r
/// (Zipf) and ln(1 + r) for its inverse document frequency: frequent tokens
/// weigh little, rare ones much, without counting over the corpus. So a text's
/// vector depends on the text and the model alone, and can be cached by
/// (model hash, text hash) across builds and restarts. Special tokens
/// ([UNK], [CLS]…, ids below 999) and single characters (punctuation, letters,
/// digits: ids 999-1995, before the words) weigh nothing.
pub fn token_weight(id: u32) -> f32 {
    if id < 1996 { 0.0 } else { ((id - 1995) as f32).ln_1p() }
}

/// Bumped whenever the way a text becomes a vector changes (weighting,
/// normalisation, quantisation), so that older cached vectors stop matching.
const VECTOR_VERSION: u64 = 1;

/// The cache key of a text's vector under `model`.
pub fn text_key(model: &Model, text: &str) -> u128 {
    let seed = model.hash() ^ VECTOR_VERSION.rotate_left(32);
    let a = fnv64(FNV_OFFSET ^ seed, text.as_bytes());
    let b = fnv64(FNV_OFFSET.rotate_left(17) ^ seed.rotate_left(7), text.as_bytes());
    (u128::from(a) << 64) | u128::from(b)
}

/// FNV-1a's offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64 bits: a stable hash (the same in every build and process).
pub fn fnv64(offset: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(offset, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// One text's vector as stored: int8 components of the unit vector and the
/// scale back to unit length.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// Scale: component = `scale` × int8.
    pub scale: f32,
    /// `dims` int8 components.
    pub data: Box<[i8]>,
}

/// Where vectors computed once are kept for the next build (see [`crate::cache`]).
pub trait VectorCache {
    /// The vector stored under `key`, if any.
    fn get(&mut self, key: u128) -> Option<Stored>;
    /// Stores a freshly computed vector.
    fn put(&mut self, key: u128, v: &Stored);
}

/// Unit vectors of the passages of an index, int8-quantised.
pub struct Vectors {
    dims: usize,
    /// `n x dims` int8 components of the unit vectors (scaled by 127 / max).
    data: Vec<i8>,
    /// Per-vector scale back to unit length.
    scales: Vec<f32>,
}

impl Vectors {
    /// Embeds `n` texts: `text(i, out)` writes text `i` into `out`. A text
    /// whose vector `cache` has is not embedded again; a new one is put there.
    pub fn build(model: &Model, n: usize, mut text: impl FnMut(usize, &mut String), cache: &mut dyn VectorCache) -> Vectors {
        let dims = model.dims();
        let mut v = Vectors { dims, data: Vec::with_capacity(n * dims), scales: Vec::with_capacity(n) };
        let mut tokenizer = Tokenizer::new(model);
        let (mut buf, mut ids, mut acc) = (String::new(), Vec::new(), vec![0f32; dims]);
        for i in 0..n {
            buf.clear();
            text(i, &mut buf);
            let key = text_key(model, &buf);
            let stored = match cache.get(key).filter(|s| s.data.len() == dims) {
                Some(s) => s,
                None => {
                    ids.clear();
                    tokenizer.tokens(&buf, &mut ids);
                    embed_into(model, &ids, &mut acc);
                    let (data, scale) = quantise(&acc);
                    let s = Stored { scale, data: data.into_boxed_slice() };
                    cache.put(key, &s);
                    s
                }
            };
            v.data.extend_from_slice(&stored.data);
            v.scales.push(stored.scale);
        }
        v
    }

    /// Cosine similarity of unit vector `q` (int8, with its scale) and vector `i`.
    pub fn dot(&self, q: &[i8], q_scale: f32, i: usize) -> f32 {
        let row = &self.data[i * self.dims..(i + 1) * self.dims];
        dot_i8(row, q) as f32 * q_scale * self.scales[i]
    }

    /// Vector `i`: its int8 components and scale.
    pub fn row(&self, i: usize) -> (&[i8], f32) {
        (&self.data[i * self.dims..(i + 1) * self.dims], self.scales[i])
    }

    /// Vectors stored.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// Whether no vector is stored.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity() + 4 * self.scales.capacity()
    }
}

/// The unit vector of a token list (zero if it has no weighted token).
pub fn embed_into(model: &Model, ids: &[u32], acc: &mut [f32]) {
    acc.iter_mut().for_each(|a| *a = 0.0);
    for &t in ids {
        let w = token_weight(t);
        if w > 0.0 {
            model.add_token(t, w, acc);
        }
    }
    let norm = acc.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        acc.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Quantises a unit vector to int8 with one scale: (components, scale);
/// the zero vector gives scale 0.
pub fn quantise(q: &[f32]) -> (Vec<i8>, f32) {
    let max = q.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; q.len()], 0.0);
    }
    let k = 127.0 / max;
    (q.iter().map(|x| (x * k).round() as i8).collect(), 1.0 / k)
}

/// `acc += w * row` (row: int8 components stored as bytes): embedding a
/// passage is a few hundred of these. In wasm it is compiled with SIMD (see
/// [`dot_i8`]), which LLVM uses for this loop as it is.
#[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
fn axpy_i8(w: f32, row: &[u8], acc: &mut [f32]) {
    for (a, &r) in acc.iter_mut().zip(row) {
        *a += w * f32::from(r as i8);
    }
}

/// Integer dot product of two int8 vectors of equal length (a multiple of 16).
#[cfg(not(target_arch = "wasm32"))]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// Integer dot product of two int8 vectors of equal length (a multiple of 16),
/// compiled with WebAssembly's 128-bit SIMD (LLVM vectorises the loop): the
/// scan over every passage vector is most of a hybrid query's time. The host
/// builds plugins without target flags, so the feature is enabled here, for
/// this function only; Wasmtime runs SIMD by default (a wasm function with a
/// target feature is safe to call: an engine without it rejects the module).
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    use core::arch::wasm32::*;
    let lanes = |c: &[i8]| -> v128 {
        let c: &[i8; 16] = c.try_into().unwrap_or(&[0; 16]);
        i8x16(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15])
    };
    let mut sum = i32x4_splat(0);
    for (x, y) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        let (x, y) = (lanes(x), lanes(y));
        sum = i32x4_add(sum, i32x4_dot_i16x8(i16x8_extend_low_i8x16(x), i16x8_extend_low_i8x16(y)));
        sum = i32x4_add(sum, i32x4_dot_i16x8(i16x8_extend_high_i8x16(x), i16x8_extend_high_i8x16(y)));
    }
    i32x4_extract_lane::<0>(sum) + i32x4_extract_lane::<1>(sum) + i32x4_extract_lane::<2>(sum) + i32x4_extract_lane::<3>(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache that keeps everything and counts what it was asked.
    #[derive(Default)]
    struct Counting {
        map: FxHashMap<u128, Stored>,
        hits: usize,
        puts: usize,
    }

    impl VectorCache for Counting {
        fn get(&mut self, key: u128) -> Option<Stored> {
            let s = self.map.get(&key).cloned();
            self.hits += usize::from(s.is_some());
            s
        }
        fn put(&mut self, key: u128, v: &Stored) {
            self.puts += 1;
            self.map.insert(key, v.clone());
        }
    }

    fn shipped() -> Arc<Model> {
        load(SHIPPED_MODEL).expect("the shipped model file loads")
    }

    #[test]
    fn shipped_model_parses_and_tokenizes_like_bert() {
        let m = shipped();
        assert!(m.vocab_len() == 30522 && m.dims() >= 64, "{} x {}", m.vocab_len(), m.dims());
        let mut t = Tokenizer::new(&m);
        let mut ids = Vec::new();
        t.tokens("Hello, unaffable!", &mut ids);
        let back: Vec<&str> = ids.iter().map(|&i| m.vocab.iter().find(|(_, v)| **v == i).map_or("?", |(k, _)| &**k)).collect();
        assert_eq!(back, ["hello", ",", "una", "##ffa", "##ble", "!"]);
    }

    #[test]
    fn a_broken_model_file_is_an_error_not_a_panic() {
        assert!(Model::parse(b"GHSE".to_vec()).is_err());
        assert!(Model::parse(b"nope".to_vec()).is_err());
        let mut bytes = std::fs::read(SHIPPED_MODEL).expect("read");
        bytes.truncate(bytes.len() - 1);
        assert!(Model::parse(bytes).expect_err("truncated").contains("truncated"));
        assert!(load("/nonexistent/model.bin").expect_err("missing").contains("/nonexistent/model.bin"));
    }

    #[test]
    fn related_texts_are_closer() {
        let m = shipped();
        let docs =
            ["The dog barked at the cat in the garden.", "Configure the database server's write-ahead log.", "A puppy is a young dog."];
        let vs = Vectors::build(&m, docs.len(), |i, out| out.push_str(docs[i]), &mut Counting::default());
        let mut q = Vec::new();
        Tokenizer::new(&m).tokens("puppies and dogs", &mut q);
        let mut acc = vec![0.0; m.dims()];
        embed_into(&m, &q, &mut acc);
        let (qi, qs) = quantise(&acc);
        assert!(vs.dot(&qi, qs, 2) > vs.dot(&qi, qs, 1));
        assert!(vs.dot(&qi, qs, 0) > vs.dot(&qi, qs, 1));
    }

    #[test]
    fn cached_vectors_are_reused_and_equal_to_fresh_ones() {
        let m = shipped();
        let docs = ["Checkpoints bound the write-ahead log.", "A role may own schemas.", "Vacuum reclaims dead rows."];
        let mut cache = Counting::default();
        let first = Vectors::build(&m, docs.len(), |i, out| out.push_str(docs[i]), &mut cache);
        assert_eq!((cache.hits, cache.puts), (0, 3));
        // One text changed: only it is embedded again.
        let edited = [docs[0], "A role may own tables.", docs[2]];
        let second = Vectors::build(&m, edited.len(), |i, out| out.push_str(edited[i]), &mut cache);
        assert_eq!((cache.hits, cache.puts), (2, 4));
        assert_eq!(first.data[..m.dims()], second.data[..m.dims()]);
        assert_ne!(first.data[m.dims()..2 * m.dims()], second.data[m.dims()..2 * m.dims()]);
        // The key depends on the model too.
        let mut other = std::fs::read(SHIPPED_MODEL).expect("read");
        let last = other.len() - 1;
        other[last] = other[last].wrapping_add(1);
        let other = Model::parse(other).expect("parse");
        assert_ne!(text_key(&m, docs[0]), text_key(&other, docs[0]));
    }

    #[test]
    fn int8_dot_product_is_exact() {
        let a: Vec<i8> = (0..64).map(|i| (i * 37 % 255 - 127) as i8).collect();
        let b: Vec<i8> = (0..64).map(|i| (i * 91 % 255 - 127) as i8).collect();
        let want: i32 = a.iter().zip(&b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
        assert_eq!(dot_i8(&a, &b), want);
        assert_eq!(dot_i8(&[-128i8; 16], &[-128i8; 16]), 16 * 128 * 128);
    }
}
