//! Vector caches: a passage's dense vector depends only on the model file and
//! the passage's text ([`dense::text_key`]), so a rebuild (a changed file in
//! the knowledge base, a restart) embeds only the passages it has not seen.
//!
//! - [`MemoryCache`]: this instance's vectors, kept across the rebuilds of one
//!   instance (and, natively, across the indexes a tool builds).
//! - [`DirCache`]: one file per knowledge base in a folder (`vector_cache`),
//!   read at build and rewritten with exactly the vectors of the new index, so
//!   it never grows past one index's vectors. It is written to a temporary
//!   name and renamed into place, so a reader never sees half a file. Inside
//!   the server the folder is the plugin's own writable cache folder (the
//!   host grants it with `writable_cache` and names it `/cache` in the
//!   config). Where the folder is read-only, missing or full, it still serves
//!   what it can read, and the write fails with a message the caller logs
//!   (leaving no partial file); retrieval works either way.
//!
//! File format (little-endian): `b"GHVC"`, u32 version = 1, u64 model hash,
//! u32 dims, then records of (u128 key, f32 scale, dims × i8), then the
//! FNV-1a hash of everything before it (u64): a file that fails it (a torn
//! write, two writers mixed) is an empty cache, never wrong vectors. Each
//! writer uses its own temporary name, so the instances of one knowledge base
//! never write into the same temporary file; the last rename wins.

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use rustc_hash::FxHashMap;

use crate::dense::{self, Stored, VectorCache};

/// Vectors kept in memory; `limit` bounds the entries (oldest are not
/// tracked: past the limit, new vectors are simply not kept).
pub struct MemoryCache {
    map: FxHashMap<u128, Stored>,
    limit: usize,
}

impl MemoryCache {
    /// An empty cache holding at most `limit` vectors.
    pub fn new(limit: usize) -> Self {
        MemoryCache { map: FxHashMap::default(), limit }
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl VectorCache for MemoryCache {
    fn get(&mut self, key: u128) -> Option<Stored> {
        self.map.get(&key).cloned()
    }

    fn put(&mut self, key: u128, v: &Stored) {
        if self.map.len() < self.limit {
            self.map.insert(key, v.clone());
        }
    }
}

/// The process's in-memory cache (one instance of the component is one
/// process): about 300 bytes a vector, so the limit is ~60 MB natively and
/// far more than a 64 MB plugin instance could index anyway.
pub fn process_cache() -> &'static Mutex<MemoryCache> {
    static CACHE: LazyLock<Mutex<MemoryCache>> = LazyLock::new(|| Mutex::new(MemoryCache::new(200_000)));
    &CACHE
}

/// A cache file in a folder, with another cache (in memory) consulted first.
/// It keeps only what the file held, and takes each entry out as a build
/// uses it: the vectors themselves end up in the index, where
/// [`DirCache::save`] reads them back, so a build never holds them twice.
pub struct DirCache<'a> {
    path: PathBuf,
    model_hash: u64,
    dims: usize,
    /// What the file held when opened, less what this build has used.
    on_disk: FxHashMap<u128, Stored>,
    loaded: usize,
    /// The key of every vector of this build, in build order.
    keys: Vec<u128>,
    /// Whether this build computed a vector the file does not have.
    changed: bool,
    memory: &'a mut dyn VectorCache,
}

const MAGIC: &[u8; 4] = b"GHVC";
const VERSION: u32 = 1;

impl<'a> DirCache<'a> {
    /// Opens `<dir>/<name>.vec` for vectors of `model` (a missing, unreadable
    /// or foreign file is an empty cache), with `memory` consulted first.
    pub fn open(dir: &Path, name: &str, model: &dense::Model, memory: &'a mut dyn VectorCache) -> Self {
        let path = dir.join(format!("{}.vec", file_stem(name)));
        let dims = model.dims();
        let on_disk = std::fs::read(&path).ok().and_then(|b| parse(&b, model.hash(), dims)).unwrap_or_default();
        let loaded = on_disk.len();
        DirCache { path, model_hash: model.hash(), dims, changed: false, on_disk, loaded, keys: Vec::new(), memory }
    }

    /// Vectors the file held when opened.
    pub fn loaded(&self) -> usize {
        self.loaded
    }

    /// Writes the file with exactly the vectors of the build that used this
    /// cache (`vectors`, built through it), if that build computed a new one
    /// or no longer has an old one; `Ok(false)` if there was nothing to write.
    pub fn save(self, vectors: &dense::Vectors) -> Result<bool, String> {
        if !self.changed && self.on_disk.is_empty() && self.keys.len() == self.loaded {
            return Ok(false);
        }
        if vectors.len() != self.keys.len() {
            return Err(format!("vector cache {}: {} vectors built, {} keys seen", self.path.display(), vectors.len(), self.keys.len()));
        }
        let mut out = Vec::with_capacity(28 + self.keys.len() * (20 + self.dims));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.model_hash.to_le_bytes());
        out.extend_from_slice(&(self.dims as u32).to_le_bytes());
        for (i, key) in self.keys.iter().enumerate() {
            let (data, scale) = vectors.row(i);
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&scale.to_le_bytes());
            out.extend(data.iter().map(|&x| x as u8));
        }
        let sum = dense::fnv64(dense::FNV_OFFSET, &out);
        out.extend_from_slice(&sum.to_le_bytes());
        let tmp = self.path.with_extension(format!("vec.{}.tmp", writer_id()));
        let shown = self.path.display();
        // A write cut short (a full cache folder) leaves no partial file to hold its room.
        let written = std::fs::write(&tmp, &out).and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("cannot write the vector cache {shown}: {e}"));
        }
        Ok(true)
    }
}

impl VectorCache for DirCache<'_> {
    fn get(&mut self, key: u128) -> Option<Stored> {
        let from_disk = self.on_disk.remove(&key);
        let v = match self.memory.get(key) {
            Some(v) => {
                self.changed |= from_disk.is_none();
                v
            }
            None => from_disk?,
        };
        self.keys.push(key);
        Some(v)
    }

    fn put(&mut self, key: u128, v: &Stored) {
        self.changed = true;
        self.memory.put(key, v);
        self.keys.push(key);
    }
}

/// An id for this writer's temporary file: the clock's nanoseconds and a
/// per-process counter (instances are separate processes, each with its own
/// counter, so the clock tells them apart).
fn writer_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{t:x}-{n}")
}

/// A file name from a knowledge base's name: letters, digits, `-` and `_`
/// kept, anything else `_` (the name comes from the operator's config).
fn file_stem(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    if s.is_empty() { "index".into() } else { s }
}

/// The records of a cache file, if it is one for this model and size.
fn parse(b: &[u8], model_hash: u64, dims: usize) -> Option<FxHashMap<u128, Stored>> {
    let (b, sum) = b.split_at_checked(b.len().checked_sub(8)?)?;
    if dense::fnv64(dense::FNV_OFFSET, b) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    if b.get(..4)? != MAGIC || u32::from_le_bytes(b.get(4..8)?.try_into().ok()?) != VERSION {
        return None;
    }
    if u64::from_le_bytes(b.get(8..16)?.try_into().ok()?) != model_hash
        || u32::from_le_bytes(b.get(16..20)?.try_into().ok()?) as usize != dims
    {
        return None;
    }
    let record = 20 + dims;
    let body = b.get(20..)?;
    if body.len() % record != 0 {
        return None;
    }
    let mut map = FxHashMap::default();
    for r in body.chunks_exact(record) {
        let key = u128::from_le_bytes(r[..16].try_into().ok()?);
        let scale = f32::from_le_bytes(r[16..20].try_into().ok()?);
        map.insert(key, Stored { scale, data: r[20..].iter().map(|&x| x as i8).collect() });
    }
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::{SHIPPED_MODEL, Vectors, load};

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("retriever-local-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    fn build(dir: &Path, texts: &[&str]) -> (Vec<i8>, usize, Result<bool, String>) {
        let model = load(SHIPPED_MODEL).expect("model");
        let mut memory = MemoryCache::new(0); // nothing kept in memory: the file alone
        let mut cache = DirCache::open(dir, "kb one", &model, &mut memory);
        let loaded = cache.loaded();
        let v = Vectors::build(&model, texts.len(), |i, out| out.push_str(texts[i]), &mut cache);
        let rows: Vec<i8> = (0..v.len()).flat_map(|i| v.row(i).0.to_vec()).collect();
        (rows, loaded, cache.save(&v))
    }

    #[test]
    fn the_vector_file_survives_a_restart_and_holds_only_the_current_passages() {
        let dir = temp_dir("restart");
        let (first, loaded, saved) = build(&dir, &["WAL archiving.", "Roles and privileges."]);
        assert_eq!((loaded, saved), (0, Ok(true)));
        // A "restart": nothing in memory, the file has both vectors.
        let (again, loaded, saved) = build(&dir, &["WAL archiving.", "Roles and privileges."]);
        assert_eq!((loaded, saved), (2, Ok(false)));
        assert_eq!(first, again);
        // One passage edited: the file is rewritten with the new set only.
        let (_, loaded, saved) = build(&dir, &["WAL archiving.", "Roles, groups and privileges."]);
        assert_eq!((loaded, saved), (2, Ok(true)));
        let (_, loaded, _) = build(&dir, &["WAL archiving."]);
        assert_eq!(loaded, 2);
        let (_, loaded, _) = build(&dir, &[]);
        assert_eq!(loaded, 1);
        let names: Vec<String> =
            std::fs::read_dir(&dir).expect("ls").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["kb_one.vec"], "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_missing_or_foreign_cache_file_is_an_empty_cache_and_the_build_still_works() {
        let dir = temp_dir("foreign");
        std::fs::write(dir.join("kb_one.vec"), b"GHVC garbage").expect("write");
        let (v, loaded, saved) = build(&dir, &["Vacuum reclaims dead rows."]);
        assert_eq!((v.is_empty(), loaded, saved), (false, 0, Ok(true)));
        // One flipped byte in a vector (a torn or mixed write): the file is not trusted.
        let mut bytes = std::fs::read(dir.join("kb_one.vec")).expect("read");
        bytes[40] ^= 1;
        std::fs::write(dir.join("kb_one.vec"), &bytes).expect("write");
        let (again, loaded, _) = build(&dir, &["Vacuum reclaims dead rows."]);
        assert_eq!((loaded, again), (0, v.clone()));
        // A folder that cannot be written (as under today's read-only grant):
        // vectors are still computed, the save reports why it failed.
        let missing = dir.join("not-there");
        let (v, loaded, saved) = build(&missing, &["Vacuum reclaims dead rows."]);
        assert_eq!((v.is_empty(), loaded), (false, 0));
        assert!(saved.expect_err("unwritable").contains("cannot write the vector cache"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
