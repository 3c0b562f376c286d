//! The watched folder's bookkeeping: which entries are plugin files, which
//! changed since the last scan, and which file serves each plugin name.
//!
//! The rules (docs/decisions/plugin-folder.md):
//! - only regular files named `*.wasm` are read; dot-files and `*.tmp` are
//!   temporary names and ignored; near misses (`*.WASM`, `x.wasm `), symbolic
//!   links, other file types and files over `plugins.max_component_mb` are
//!   refused unread, and reported once;
//! - a file is read again only when its (device, inode, size, mtime, ctime)
//!   stamp changes, and reloaded only when its hash changes;
//! - a file whose content fails the check keeps its previous version serving;
//! - a complete component is refused when it clashes: with a bundled plugin
//!   of another kind, with a built-in security policy the operator did not
//!   open (`plugins.allow_policy_overrides`), or with a file earlier by name
//!   that declares the same plugin (that one serves);
//! - file names are shown escaped wherever they are logged or audited.
//!
//! Generic over the loaded plugin ([`Offer`]) so the rules are unit-tested
//! without compiling components.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Kind, PluginAction};

/// The security policies built into Gatehouse: a watched-folder file never
/// replaces one unless `plugins.allow_policy_overrides` names it.
pub(crate) const BUILTIN_POLICIES: &[&str] = &["internal", "public", "confidential"];

/// What the folder needs to know of a loaded component.
pub(crate) trait Offer {
    fn name(&self) -> &str;
    fn kind(&self) -> Kind;
    fn sha256(&self) -> &str;
}

/// The folder's rules that come from the config.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    /// Largest component read, in bytes (`plugins.max_component_mb`).
    pub max_bytes: u64,
    /// Bundled policies a file may replace (`plugins.allow_policy_overrides`).
    pub allow_policy_overrides: Vec<String>,
    /// The bundled plugins: name → kind.
    pub bundled: BTreeMap<String, Kind>,
}

/// What identifies a file's content without reading it. The ctime catches
/// writers that restore the mtime (`cp -p`, `touch -d`); the inode catches a
/// rename into place of a file with the same size and mtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    #[cfg(unix)]
    pub fn of(m: &Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp { dev: m.dev(), ino: m.ino(), size: m.size(), mtime: (m.mtime(), m.mtime_nsec()), ctime: (m.ctime(), m.ctime_nsec()) }
    }

    #[cfg(not(unix))]
    pub fn of(m: &Metadata) -> Stamp {
        let since = |t: std::io::Result<std::time::SystemTime>| {
            t.ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or((0, 0), |d| (d.as_secs() as i64, d.subsec_nanos() as i64))
        };
        Stamp { dev: 0, ino: 0, size: m.len(), mtime: since(m.modified()), ctime: since(m.created()) }
    }
}

/// What a directory entry's name says it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NameClass {
    /// A plugin file name (`*.wasm`).
    Plugin,
    /// A temporary name (dot-file, `*.tmp`) or not a plugin name at all: not looked at.
    Ignored,
    /// Almost a plugin name; the reason says how to fix it.
    NearMiss(String),
}

/// Classify a file name. Case variants of `.wasm` are refused rather than
/// accepted: one spelling means what loads is what `ls *.wasm` shows.
pub(crate) fn classify_name(name: &OsStr) -> NameClass {
    let text = name.to_string_lossy();
    if text.starts_with('.') || text.ends_with(".tmp") {
        return NameClass::Ignored;
    }
    if text.ends_with(".wasm") && text.len() > ".wasm".len() {
        return NameClass::Plugin;
    }
    let trimmed = text.trim_end();
    let lower = trimmed.to_lowercase();
    if lower.ends_with(".wasm") && trimmed.len() > ".wasm".len() {
        let stem = trimmed.get(..trimmed.len() - ".wasm".len()).unwrap_or(trimmed);
        let why = if trimmed.len() != text.len() {
            "its name ends in white space after the extension"
        } else {
            "its extension is not lower-case"
        };
        return NameClass::NearMiss(format!(
            "not loaded: {why}; only `*.wasm` files load (rename it to {})",
            shown(OsStr::new(&format!("{stem}.wasm")))
        ));
    }
    NameClass::Ignored
}

/// A file name or path as logs and audit records show it: control and
/// invisible formatting characters (newlines, bidi overrides) and bytes that
/// are not UTF-8 are escaped (`\n`, `\u{202e}`, `\xff`), and so is `\`, so
/// the text is one line and maps back to exactly one name.
pub fn shown(name: &OsStr) -> String {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(name).to_vec();
    #[cfg(not(unix))]
    let bytes = name.to_string_lossy().into_owned().into_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&shown_text(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// [`shown`] for a path.
pub fn shown_path(p: &Path) -> String {
    shown(p.as_os_str())
}

/// Text with its control and invisible formatting characters escaped (see [`shown`]).
pub fn shown_text(s: &str) -> String {
    let invisible = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2028}' | '\u{2029}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !s.chars().any(|c| c == '\\' || invisible(c)) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// One file of the folder.
pub(crate) struct FileState<P> {
    /// The stamp of the content last looked at.
    stamp: Option<Stamp>,
    /// Hash of the file's current content, when it was read.
    pub sha256: Option<String>,
    /// Size on disk (regular files).
    pub size: Option<u64>,
    /// The latest version of this file that passed the check (it may be older
    /// than the current content, when that failed).
    pub offered: Option<Arc<P>>,
    /// Why the current content failed the check (or was not read).
    pub check_error: Option<String>,
    /// Why the folder's rules refuse `offered` (set by every resolution).
    pub rule_error: Option<String>,
    /// The last refusal reported, so each is reported once.
    reported: Option<String>,
}

impl<P> Default for FileState<P> {
    fn default() -> Self {
        FileState { stamp: None, sha256: None, size: None, offered: None, check_error: None, rule_error: None, reported: None }
    }
}

impl<P> FileState<P> {
    /// Why the file does not serve its current content, if it does not.
    pub fn error(&self) -> Option<&str> {
        self.check_error.as_deref().or(self.rule_error.as_deref())
    }
}

/// One thing a scan changed: a name loaded, reloaded or removed (`version`
/// is the plugin concerned), or a file refused (reported once per refusal;
/// `plugin` is then the file's shown name).
pub(crate) struct Change<P> {
    pub action: PluginAction,
    pub plugin: String,
    pub file: OsString,
    pub message: String,
    pub version: Option<Arc<P>>,
    /// Hash of the refused file's content, when it was read.
    pub sha256: Option<String>,
}

impl<P> Change<P> {
    fn of(action: PluginAction, plugin: &str, file: &OsStr, message: String, version: &Arc<P>) -> Change<P> {
        Change { action, plugin: plugin.to_owned(), file: file.to_owned(), message, version: Some(version.clone()), sha256: None }
    }
}

/// The result of one scan.
pub(crate) struct ScanReport<P> {
    /// What changed: removals, then loads and reloads, then refusals.
    pub changes: Vec<Change<P>>,
    /// Whether the set of served plugins changed (the registry must be rebuilt).
    pub changed: bool,
    /// Files read (and hashed) by this scan; the tests check that unchanged files are not read.
    #[cfg_attr(not(test), expect(dead_code, reason = "only the tests read the count"))]
    pub reads: usize,
}

/// The watched folder's state between scans.
pub(crate) struct Folder<P> {
    dir: PathBuf,
    /// By file name: resolution goes in this order.
    files: BTreeMap<OsString, FileState<P>>,
    /// What serves each name from a file: name → file.
    served: HashMap<String, (OsString, Arc<P>)>,
}

impl<P: Offer> Folder<P> {
    pub fn new(dir: PathBuf) -> Folder<P> {
        Folder { dir, files: BTreeMap::new(), served: HashMap::new() }
    }

    /// Every file of the folder that is a plugin file or a near miss, by name.
    pub fn files(&self) -> impl Iterator<Item = (&OsString, &FileState<P>)> {
        self.files.iter()
    }

    /// The plugins served from files: name → (file, plugin).
    pub fn served(&self) -> impl Iterator<Item = (&String, &(OsString, Arc<P>))> {
        self.served.iter()
    }

    /// The file serving `name`, and its version.
    pub fn serving(&self, name: &str) -> Option<&(OsString, Arc<P>)> {
        self.served.get(name)
    }

    /// One file's state.
    pub fn file(&self, name: &OsStr) -> Option<&FileState<P>> {
        self.files.get(name)
    }

    /// Forget what was concluded about refused files, so the next scan looks
    /// at them again (the limits changed).
    pub fn recheck_refused(&mut self) {
        for f in self.files.values_mut() {
            if f.check_error.is_some() {
                f.stamp = None;
                f.sha256 = None;
            }
        }
    }

    /// Bring the state in line with the folder: look at changed files, load
    /// their content with `load`, apply the rules, and say what changed.
    pub fn scan(&mut self, rules: &Rules, mut load: impl FnMut(&[u8], &Path) -> Result<P, String>) -> ScanReport<P> {
        let mut reads = 0;
        let mut seen: Vec<OsString> = Vec::new();
        let entries: Vec<std::fs::DirEntry> = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd.filter_map(Result::ok).collect(),
            Err(e) => {
                tracing::warn!(dir = %shown_path(&self.dir), error = %e, "cannot read the watched plugin folder");
                Vec::new()
            }
        };
        for entry in entries {
            let name = entry.file_name();
            let near_miss = match classify_name(&name) {
                NameClass::Ignored => continue,
                NameClass::Plugin => None,
                NameClass::NearMiss(why) => Some(why),
            };
            let path = self.dir.join(&name);
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue; // gone since the listing; its removal is an event of its own
            };
            seen.push(name.clone());
            let state = self.files.entry(name).or_default();
            let stamp = Stamp::of(&meta);
            if state.stamp == Some(stamp) {
                continue;
            }
            state.stamp = Some(stamp);
            let refusal = near_miss.or_else(|| refuse_unread(&meta, rules.max_bytes));
            if let Some(why) = refusal {
                state.sha256 = None;
                state.size = meta.file_type().is_file().then_some(meta.len());
                state.check_error = Some(why);
                continue;
            }
            reads += 1;
            let bytes = match read_checked(&path, stamp, rules.max_bytes) {
                Ok(b) => b,
                Err(why) => {
                    state.sha256 = None;
                    state.check_error = Some(why);
                    continue;
                }
            };
            let sha = crate::sha256_hex(&bytes);
            state.size = Some(bytes.len() as u64);
            if state.sha256.as_deref() == Some(sha.as_str()) {
                continue; // touched, not changed
            }
            state.sha256 = Some(sha);
            match load(&bytes, &path) {
                Ok(p) => {
                    state.offered = Some(Arc::new(p));
                    state.check_error = None;
                }
                Err(e) => state.check_error = Some(format!("not loaded: {}", shown_text(&e))),
            }
        }
        self.files.retain(|name, _| seen.contains(name));
        let (changes, changed) = self.resolve(rules);
        ScanReport { changes, changed, reads }
    }

    /// Apply the rules to every file's offered version in file-name order;
    /// returns what changed against the previous resolution.
    fn resolve(&mut self, rules: &Rules) -> (Vec<Change<P>>, bool) {
        let mut served: HashMap<String, (OsString, Arc<P>)> = HashMap::new();
        for (file, state) in self.files.iter_mut() {
            state.rule_error = None;
            let Some(p) = state.offered.clone() else { continue };
            let name = p.name();
            let builtin_policy = BUILTIN_POLICIES.contains(&name) || rules.bundled.get(name).is_some_and(|k| *k == Kind::Policy);
            state.rule_error = if let Some(k) = rules.bundled.get(name).filter(|k| **k != p.kind()) {
                Some(format!(
                    "declares {name}, the name of the bundled {} plugin, but is a {} plugin; a file overrides a bundled plugin only with one of the same kind",
                    k.as_str(),
                    p.kind().as_str()
                ))
            } else if builtin_policy && !rules.allow_policy_overrides.iter().any(|a| a == name) {
                Some(format!(
                    "declares {name}, the name of a built-in security policy; the watched folder replaces one only when plugins.allow_policy_overrides lists it"
                ))
            } else if let Some((first, _)) = served.get(name) {
                Some(format!(
                    "declares {name}, which {} already provides (of two files declaring one plugin, the first by file name serves); remove or rename one of them",
                    shown(first)
                ))
            } else {
                None
            };
            if state.rule_error.is_none() {
                served.insert(name.to_owned(), (file.clone(), p));
            }
        }

        let mut removed = Vec::new();
        let mut added = Vec::new();
        let mut names: Vec<&String> = self.served.keys().chain(served.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            match (self.served.get(name), served.get(name)) {
                (Some((old_file, old)), None) => {
                    let why = match self.files.get(old_file) {
                        None => format!("{} was removed from the watched folder", shown(old_file)),
                        Some(s) => match (&s.rule_error, &s.offered) {
                            (Some(e), _) => format!("{} {e}", shown(old_file)),
                            (None, Some(p)) if p.name() != name => format!("{} now holds {}", shown(old_file), p.name()),
                            _ => format!("{} no longer provides it", shown(old_file)),
                        },
                    };
                    let fallback =
                        if rules.bundled.contains_key(name) { format!("; the bundled {name} serves again") } else { String::new() };
                    removed.push(Change::of(PluginAction::Removed, name, old_file, format!("{why}{fallback}"), old));
                }
                (None, Some((file, p))) => {
                    added.push(if rules.bundled.contains_key(name) {
                        let message = format!("{} overrides the bundled {} {name}", shown(file), p.kind().as_str());
                        Change::of(PluginAction::Reloaded, name, file, message, p)
                    } else {
                        Change::of(PluginAction::Loaded, name, file, format!("{name} from {}", shown(file)), p)
                    });
                }
                (Some((old_file, old)), Some((file, p))) if old_file != file || old.sha256() != p.sha256() => {
                    let message = if old_file == file {
                        format!("{name} from {} replaced by a new version", shown(file))
                    } else {
                        format!("{name} from {} replaces the one from {}", shown(file), shown(old_file))
                    };
                    added.push(Change::of(PluginAction::Reloaded, name, file, message, p));
                }
                _ => {}
            }
        }
        let changed = !removed.is_empty() || !added.is_empty();
        self.served = served;

        let mut refused = Vec::new();
        for (file, state) in self.files.iter_mut() {
            let now = state.error().map(str::to_owned);
            if now.is_some() && now != state.reported {
                let mut message = format!("{} {}", shown(file), now.as_deref().unwrap_or_default());
                if let (Some(_), Some(p)) = (&state.check_error, &state.offered)
                    && self.served.get(p.name()).is_some_and(|(f, _)| f == file)
                {
                    message.push_str(&format!("; its previous version of {} keeps serving", p.name()));
                }
                refused.push(Change {
                    action: PluginAction::Failed,
                    plugin: shown(file),
                    file: file.clone(),
                    message,
                    // The component's kind, when it got that far.
                    version: if state.check_error.is_none() { state.offered.clone() } else { None },
                    sha256: state.sha256.clone(),
                });
            }
            state.reported = now;
        }
        removed.extend(added);
        removed.extend(refused);
        (removed, changed)
    }

    /// For a file that is refused but whose earlier version still serves: that version.
    pub fn previous(&self, file: &OsStr) -> Option<&Arc<P>> {
        let state = self.files.get(file)?;
        state.check_error.as_ref()?;
        let p = state.offered.as_ref()?;
        self.served.get(p.name()).filter(|(f, _)| f == file).map(|(_, p)| p)
    }
}

/// Why a directory entry is refused before it is opened: a link, a special
/// file, or too big.
fn refuse_unread(meta: &Metadata, max_bytes: u64) -> Option<String> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Some(
            "not loaded: it is a symbolic link; the watched folder loads regular files only (copy the component in, then rename it into place)"
                .into(),
        );
    }
    if !ft.is_file() {
        return Some("not loaded: it is not a regular file".into());
    }
    too_big(meta.len(), max_bytes)
}

fn too_big(size: u64, max_bytes: u64) -> Option<String> {
    (size > max_bytes).then(|| {
        format!(
            "not loaded: it is {size} bytes, over plugins.max_component_mb ({} MiB); raise that limit if the component is genuine",
            max_bytes / (1024 * 1024)
        )
    })
}

/// Read a file the listing said is a regular file of acceptable size, without
/// following a link swapped in since, nor blocking on a FIFO, nor reading
/// more than `max_bytes` if it grew.
fn read_checked(path: &Path, stamp: Stamp, max_bytes: u64) -> Result<Vec<u8>, String> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut opts, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file =
        opts.open(path).map_err(|e| format!("not loaded: cannot open it ({e}); it changed while it was read, or is not a regular file"))?;
    let meta = file.metadata().map_err(|e| format!("not loaded: cannot stat it ({e})"))?;
    if !meta.file_type().is_file() || Stamp::of(&meta).ino != stamp.ino {
        return Err("not loaded: it was replaced while it was read; it is read again at the next change".into());
    }
    let cap = meta.len().min(max_bytes) as usize;
    let mut bytes = Vec::with_capacity(cap);
    file.take(max_bytes + 1).read_to_end(&mut bytes).map_err(|e| format!("not loaded: cannot read it ({e})"))?;
    if let Some(why) = too_big(bytes.len() as u64, max_bytes) {
        return Err(why);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in component: its bytes are `name:kind`.
    struct Fake {
        name: String,
        kind: Kind,
        sha: String,
    }

    impl Offer for Fake {
        fn name(&self) -> &str {
            &self.name
        }
        fn kind(&self) -> Kind {
            self.kind
        }
        fn sha256(&self) -> &str {
            &self.sha
        }
    }

    fn fake(bytes: &[u8], _path: &Path) -> Result<Fake, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not a valid WebAssembly component".to_owned())?;
        let (name, kind) = text.trim().split_once(':').ok_or_else(|| "not a valid WebAssembly component".to_owned())?;
        let kind = match kind {
            "provider" => Kind::Provider,
            "shield" => Kind::Shield,
            "policy" => Kind::Policy,
            _ => return Err("implements no Gatehouse world".into()),
        };
        Ok(Fake { name: name.into(), kind, sha: crate::sha256_hex(bytes) })
    }

    fn rules() -> Rules {
        let bundled = [("provider-echo", Kind::Provider), ("internal", Kind::Policy), ("prompt-shield", Kind::Shield)];
        Rules { max_bytes: 1024, allow_policy_overrides: vec![], bundled: bundled.iter().map(|(n, k)| ((*n).to_owned(), *k)).collect() }
    }

    fn write(dir: &Path, name: &str, content: &str) {
        let tmp = dir.join(".tmp-write");
        std::fs::write(&tmp, content).expect("write");
        std::fs::rename(tmp, dir.join(name)).expect("rename");
    }

    fn served(f: &Folder<Fake>) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = f.served().map(|(n, (file, _))| (n.clone(), file.to_string_lossy().into_owned())).collect();
        v.sort();
        v
    }

    fn refusals(r: &ScanReport<Fake>) -> Vec<String> {
        r.changes.iter().filter(|c| c.action == PluginAction::Failed).map(|c| c.message.clone()).collect()
    }

    /// (action, plugin, file, message) of each change.
    fn brief(r: &ScanReport<Fake>) -> Vec<(&'static str, String, String, String)> {
        r.changes.iter().map(|c| (c.action.as_str(), c.plugin.clone(), c.file.to_string_lossy().into_owned(), c.message.clone())).collect()
    }

    fn change(action: &'static str, plugin: &str, file: &str, message: &str) -> (&'static str, String, String, String) {
        (action, plugin.into(), file.into(), message.into())
    }

    #[test]
    fn names_are_plugin_files_temporary_names_or_reported_near_misses() {
        assert_eq!(classify_name(OsStr::new("a.wasm")), NameClass::Plugin);
        for ignored in [".a.wasm", ".a.wasm.tmp", "a.wasm.tmp", "README.md", "notes", ".wasm"] {
            assert_eq!(classify_name(OsStr::new(ignored)), NameClass::Ignored, "{ignored}");
        }
        for (near, fix) in [("A.WASM", "A.wasm"), ("b.Wasm", "b.wasm"), ("c.wasm ", "c.wasm"), ("d.wasm\n", "d.wasm")] {
            match classify_name(OsStr::new(near)) {
                NameClass::NearMiss(why) => assert!(why.contains(&format!("rename it to {fix}")), "{near}: {why}"),
                other => panic!("{near}: {other:?}"),
            }
        }
    }

    #[test]
    fn names_are_shown_on_one_line_and_map_back_to_one_name() {
        assert_eq!(shown(OsStr::new("plain-name_1.wasm")), "plain-name_1.wasm");
        assert_eq!(shown(OsStr::new("evil\nERROR forged.wasm")), "evil\\nERROR forged.wasm");
        assert_eq!(shown(OsStr::new("a\\nb.wasm")), "a\\\\nb.wasm", "a literal backslash-n differs from a newline");
        assert_eq!(shown(OsStr::new("x\u{202e}mvs.wasm")), "x\\u{202e}mvs.wasm");
        assert_eq!(shown(OsStr::new("tab\there\r\u{1b}[31m")), "tab\\there\\r\\u{1b}[31m");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            assert_eq!(shown(OsStr::from_bytes(b"bad\xff\xfe.wasm")), "bad\\xff\\xfe.wasm");
        }
    }

    #[test]
    fn an_unchanged_folder_is_not_read_again_and_a_touched_file_is_not_reloaded() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), "a.wasm", "alpha:provider");
        write(dir.path(), "b.wasm", "beta:shield");
        let mut f = Folder::<Fake>::new(dir.path().to_path_buf());
        let mut loads = 0;
        let r = f.scan(&rules(), |b, p| {
            loads += 1;
            fake(b, p)
        });
        assert_eq!((r.reads, loads, r.changed), (2, 2, true));
        assert_eq!(
            brief(&r),
            vec![change("loaded", "alpha", "a.wasm", "alpha from a.wasm"), change("loaded", "beta", "b.wasm", "beta from b.wasm")]
        );
        let r = f.scan(&rules(), fake);
        assert_eq!((r.reads, r.changed, r.changes.len()), (0, false, 0), "nothing changed, nothing read");
        // A new mtime with the same bytes: read and hashed, not loaded again.
        let file = std::fs::File::options().write(true).open(dir.path().join("a.wasm")).expect("open");
        file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5)).expect("touch");
        let r = f.scan(&rules(), |_, _| panic!("the same bytes are not loaded again"));
        assert_eq!((r.reads, r.changed, r.changes.len()), (1, false, 0));
        // New content: reloaded.
        write(dir.path(), "a.wasm", "alpha:provider\n");
        let r = f.scan(&rules(), fake);
        assert_eq!(r.reads, 1);
        assert_eq!(brief(&r), vec![change("reloaded", "alpha", "a.wasm", "alpha from a.wasm replaced by a new version")]);
    }

    #[cfg(unix)]
    #[test]
    fn links_special_files_and_oversized_files_are_refused_unread_and_reported_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let outside = tempfile::tempdir().expect("tmp");
        std::fs::write(outside.path().join("target.wasm"), "alpha:provider").expect("write");
        std::os::unix::fs::symlink(outside.path().join("target.wasm"), dir.path().join("link.wasm")).expect("symlink");
        std::fs::create_dir(dir.path().join("dir.wasm")).expect("dir");
        // A FIFO: opening it for reading would block the scan for ever.
        let made = std::process::Command::new("mkfifo").arg(dir.path().join("fifo.wasm")).status().expect("run mkfifo");
        assert!(made.success(), "mkfifo");
        std::fs::File::create(dir.path().join("big.wasm")).expect("big").set_len(1 << 30).expect("sparse");
        write(dir.path(), "UPPER.WASM", "beta:provider");
        let mut f = Folder::<Fake>::new(dir.path().to_path_buf());
        let r = f.scan(&rules(), |_, p| panic!("{} was read", p.display()));
        assert_eq!((r.reads, r.changed), (0, false));
        let mut msgs = refusals(&r);
        msgs.sort();
        assert_eq!(msgs.len(), 5, "{msgs:?}");
        assert!(msgs[0].starts_with("UPPER.WASM not loaded: its extension is not lower-case"), "{}", msgs[0]);
        assert!(msgs[1].starts_with("big.wasm not loaded: it is 1073741824 bytes, over plugins.max_component_mb"), "{}", msgs[1]);
        assert!(msgs[2].starts_with("dir.wasm not loaded: it is not a regular file"), "{}", msgs[2]);
        assert!(msgs[3].starts_with("fifo.wasm not loaded: it is not a regular file"), "{}", msgs[3]);
        assert!(msgs[4].starts_with("link.wasm not loaded: it is a symbolic link"), "{}", msgs[4]);
        let r = f.scan(&rules(), |_, p| panic!("{} was read", p.display()));
        assert!(r.changes.is_empty(), "reported once: {:?}", brief(&r));
        // Each is listed with its error and no hash.
        let listed: Vec<_> = f.files().map(|(n, s)| (n.to_string_lossy().into_owned(), s.error().is_some(), s.sha256.is_some())).collect();
        assert_eq!(listed.len(), 5);
        assert!(listed.iter().all(|(_, err, sha)| *err && !sha), "{listed:?}");
    }

    #[test]
    fn of_two_files_declaring_one_name_the_first_by_file_name_serves() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), "m.wasm", "alpha:provider");
        let mut f = Folder::<Fake>::new(dir.path().to_path_buf());
        f.scan(&rules(), fake);
        write(dir.path(), "z.wasm", "alpha:provider\n");
        let r = f.scan(&rules(), fake);
        assert!(!r.changed);
        assert_eq!(
            refusals(&r),
            vec![
                "z.wasm declares alpha, which m.wasm already provides (of two files declaring one plugin, the first by file name serves); remove or rename one of them"
            ]
        );
        // A file earlier by name takes over; the one it displaces is refused, naming it.
        write(dir.path(), "a.wasm", "alpha:provider\n\n");
        let r = f.scan(&rules(), fake);
        assert_eq!(served(&f), vec![("alpha".into(), "a.wasm".into())]);
        assert_eq!(brief(&r)[0], change("reloaded", "alpha", "a.wasm", "alpha from a.wasm replaces the one from m.wasm"));
        // z.wasm's refusal names a new file, so it is reported again.
        let msgs = refusals(&r);
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs[0].starts_with("m.wasm declares alpha, which a.wasm already provides"), "{msgs:?}");
        assert!(msgs[1].starts_with("z.wasm declares alpha, which a.wasm already provides"), "{msgs:?}");
        let r = f.scan(&rules(), fake);
        assert!(r.changes.is_empty(), "nothing new: {:?}", brief(&r));
        // The same folder resolves the same way from scratch (a restart).
        let mut again = Folder::<Fake>::new(dir.path().to_path_buf());
        again.scan(&rules(), fake);
        assert_eq!(served(&again), served(&f));
    }

    #[test]
    fn built_in_policies_and_kind_clashes_are_refused_and_bundled_providers_overridden() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), "p.wasm", "internal:policy");
        write(dir.path(), "q.wasm", "public:policy");
        write(dir.path(), "k.wasm", "provider-echo:policy");
        write(dir.path(), "e.wasm", "provider-echo:provider");
        let mut f = Folder::<Fake>::new(dir.path().to_path_buf());
        let r = f.scan(&rules(), fake);
        assert_eq!(served(&f), vec![("provider-echo".into(), "e.wasm".into())]);
        assert_eq!(brief(&r)[0], change("reloaded", "provider-echo", "e.wasm", "e.wasm overrides the bundled provider provider-echo"));
        let msgs = refusals(&r);
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(
            msgs[0].contains("k.wasm declares provider-echo, the name of the bundled provider plugin, but is a policy plugin"),
            "{msgs:?}"
        );
        assert!(
            msgs[1].contains("p.wasm declares internal, the name of a built-in security policy")
                && msgs[1].contains("plugins.allow_policy_overrides")
        );
        assert!(msgs[2].starts_with("q.wasm declares public"), "not bundled here, still built in: {msgs:?}");
        // The operator opens `internal` by name: the next resolution serves it.
        let mut open = rules();
        open.allow_policy_overrides = vec!["internal".into()];
        f.recheck_refused();
        let r = f.scan(&open, fake);
        assert_eq!(brief(&r), vec![change("reloaded", "internal", "p.wasm", "p.wasm overrides the bundled policy internal")]);
        assert!(served(&f).contains(&("internal".into(), "p.wasm".into())));
    }

    #[test]
    fn a_file_whose_component_changes_name_removes_the_old_name_and_loads_the_new() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), "r.wasm", "alpha:provider");
        write(dir.path(), "e.wasm", "provider-echo:provider");
        let mut f = Folder::<Fake>::new(dir.path().to_path_buf());
        f.scan(&rules(), fake);
        write(dir.path(), "r.wasm", "beta:shield");
        let r = f.scan(&rules(), fake);
        assert_eq!(
            brief(&r),
            vec![change("removed", "alpha", "r.wasm", "r.wasm now holds beta"), change("loaded", "beta", "r.wasm", "beta from r.wasm")]
        );
        // A broken version keeps the previous one serving, and says so; removal says the bundled one is back.
        write(dir.path(), "r.wasm", "garbage");
        let r = f.scan(&rules(), fake);
        assert!(!r.changed);
        assert_eq!(refusals(&r), vec!["r.wasm not loaded: not a valid WebAssembly component; its previous version of beta keeps serving"]);
        assert!(f.previous(OsStr::new("r.wasm")).is_some_and(|p| p.name == "beta"));
        assert!(f.files().any(|(n, s)| n == "r.wasm" && s.sha256.as_deref() == Some(crate::sha256_hex(b"garbage").as_str())));
        std::fs::remove_file(dir.path().join("e.wasm")).expect("rm");
        let r = f.scan(&rules(), fake);
        assert_eq!(
            brief(&r),
            vec![change(
                "removed",
                "provider-echo",
                "e.wasm",
                "e.wasm was removed from the watched folder; the bundled provider-echo serves again"
            )]
        );
    }
}
