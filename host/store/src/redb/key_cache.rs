//! API keys by secret hash, kept in memory for the auth path.
//!
//! Every authenticated request looks its key up; as a redb read transaction
//! that was ~2 % of a chat request's CPU (docs/benchmarks.md). The cache is
//! correct without a time-to-live because this process is the only writer of
//! the database file (redb holds an exclusive lock on it):
//!
//! - every key write (create, update, revoke) bumps `generation` once its
//!   commit is acknowledged, before the admin call answers;
//! - an entry remembers the generation it was read under, and a lookup only
//!   trusts an entry of the current generation.
//!
//! So a lookup that read the database just before a revoke's commit stores an
//! entry of the old generation, which no later lookup trusts; and once a revoke
//! has answered, no request accepts the key. Unknown hashes are not cached (a
//! client sending random keys cannot grow the map), and the map is emptied when
//! it reaches `MAX_ENTRIES`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::KeyHash;
use crate::model::ApiKeyRecord;

/// Keys kept; a deployment with more active keys re-reads some from redb.
const MAX_ENTRIES: usize = 16_384;

#[derive(Default)]
pub struct KeyCache {
    generation: AtomicU64,
    entries: Mutex<HashMap<KeyHash, (u64, Arc<ApiKeyRecord>)>>,
}

impl KeyCache {
    /// The generation to read under: take it before reading the database.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached record, if it was read under the current generation.
    pub fn get(&self, hash: &KeyHash) -> Option<Arc<ApiKeyRecord>> {
        let current = self.generation();
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(hash).filter(|(g, _)| *g == current).map(|(_, k)| k.clone())
    }

    /// Remember a record read from the database under `generation`.
    pub fn put(&self, hash: KeyHash, generation: u64, record: Arc<ApiKeyRecord>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&hash) {
            entries.clear();
        }
        entries.insert(hash, (generation, record));
    }

    /// A key write was committed: no entry read before it is trusted again.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        // Old-generation entries are dead weight; drop them now rather than
        // keep a revoked key's record in memory.
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> Arc<ApiKeyRecord> {
        Arc::new(ApiKeyRecord {
            id: format!("key_{name}"),
            user_id: "usr_1".into(),
            name: name.into(),
            hash: KeyHash::of(name),
            prefix: "sk-abcd".into(),
            admin: false,
            group_id: None,
            allowed_models: None,
            allowed_indexes: None,
            allowed_policies: None,
            default_policy: None,
            limits: Default::default(),
            created_at: chrono::Utc::now(),
            revoked_at: None,
            suspended_at: None,
            tenant_admin: false,
        })
    }

    #[test]
    fn an_entry_read_before_a_key_write_is_never_trusted_after_it() {
        let cache = KeyCache::default();
        let h = KeyHash::of("sk-one");
        // A lookup takes the generation, reads redb (the key is valid) …
        let g = cache.generation();
        // … a revoke commits and invalidates before the lookup stores its read.
        cache.invalidate();
        cache.put(h, g, record("one"));
        assert!(cache.get(&h).is_none(), "a read from before the revoke must not be served");
        // A read under the new generation is served.
        cache.put(h, cache.generation(), record("one"));
        assert_eq!(cache.get(&h).expect("cached").name, "one");
        cache.invalidate();
        assert!(cache.get(&h).is_none());
    }

    #[test]
    fn the_map_is_bounded() {
        let cache = KeyCache::default();
        let g = cache.generation();
        for i in 0..MAX_ENTRIES + 10 {
            cache.put(KeyHash::of(&format!("sk-{i}")), g, record("x"));
        }
        let len = cache.entries.lock().expect("lock").len();
        assert!(len <= MAX_ENTRIES, "{len} entries");
        assert!(cache.get(&KeyHash::of(&format!("sk-{}", MAX_ENTRIES + 9))).is_some());
    }
}
