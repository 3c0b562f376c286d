//! Reading the knowledge-base folder.
//!
//! Recursive, in sorted order (so the index is the same on every build),
//! without following symbolic links, skipping hidden entries (`.git`,
//! `.DS_Store`). Only files with a supported extension are read. A file is
//! skipped, never an error, when it is larger than the size limit, contains a
//! NUL byte (binary), or is not valid UTF-8; reading stops at the file-count
//! and total-size limits. An unreadable root is an error: the operator
//! pointed the index at the wrong place.

use std::path::Path;

use crate::extract::Format;

/// Limits on what is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Files larger than this are skipped.
    pub max_file_bytes: u64,
    /// At most this many files are read.
    pub max_files: usize,
    /// Reading stops once this many bytes have been read.
    pub max_total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_file_bytes: 2 << 20, max_files: 50_000, max_total_bytes: 64 << 20 }
    }
}

/// What a walk read and skipped.
#[derive(Debug, Default)]
pub struct Walk {
    /// `(path relative to the root with '/' separators, text)`, sorted by path.
    pub files: Vec<(String, String)>,
    /// Supported files left out (too large, binary, not UTF-8, unreadable, over a limit).
    pub skipped: usize,
}

/// Reads the supported files under `root`.
pub fn read_dir(root: &Path, limits: Limits) -> Result<Walk, String> {
    std::fs::read_dir(root).map_err(|e| format!("cannot read the knowledge-base folder {}: {e}", root.display()))?;
    let mut walk = Walk::default();
    let mut total = 0u64;
    // Directories still to visit, as (absolute path, relative path).
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            walk.skipped += 1;
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                walk.skipped += 1;
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let rel_path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                subdirs.push((entry.path(), rel_path));
                continue;
            }
            if !kind.is_file() || Format::of(&name).is_none() {
                continue;
            }
            if walk.files.len() >= limits.max_files || total >= limits.max_total_bytes {
                walk.skipped += 1;
                continue;
            }
            let size = entry.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if size > limits.max_file_bytes {
                walk.skipped += 1;
                continue;
            }
            match std::fs::read(entry.path()).ok().and_then(|bytes| decode(bytes, limits.max_file_bytes)) {
                Some(text) => {
                    total += text.len() as u64;
                    walk.files.push((rel_path, text));
                }
                None => walk.skipped += 1,
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    walk.files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(walk)
}

/// The text of a file, or `None` if it is binary, not UTF-8, or too large.
pub fn decode(bytes: Vec<u8>, max_bytes: u64) -> Option<String> {
    if bytes.len() as u64 > max_bytes || bytes.contains(&0) {
        return None;
    }
    let mut text = String::from_utf8(bytes).ok()?;
    if text.starts_with('\u{feff}') {
        text.drain(..3);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_supported_files_with_relative_paths_and_skips_bad_ones() {
        let dir = std::env::temp_dir().join(format!("retriever-local-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let w = |p: &str, b: &[u8]| {
            let path = dir.join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, b).expect("write");
        };
        w("b.md", b"# B");
        w("a/z.txt", b"\xef\xbb\xbfz text");
        w("a/deep/x.HTML", b"<p>x</p>");
        w("a/bin.txt", b"abc\0def");
        w("a/latin1.md", b"caf\xe9");
        w("big.md", &vec![b'a'; 2000]);
        w("image.png", b"\x89PNG");
        w(".git/config.md", b"# hidden");
        let limits = Limits { max_file_bytes: 1000, ..Limits::default() };
        let walk = read_dir(&dir, limits).expect("walk");
        let paths: Vec<_> = walk.files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a/deep/x.HTML", "a/z.txt", "b.md"]);
        assert_eq!(walk.files[1].1, "z text");
        assert_eq!(walk.skipped, 3);
        let few = read_dir(&dir, Limits { max_files: 1, ..limits }).expect("walk");
        assert_eq!(few.files.len(), 1);
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert!(read_dir(&dir, limits).expect_err("missing root").contains("cannot read"));
    }
}
