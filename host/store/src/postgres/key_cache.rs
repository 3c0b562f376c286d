//! API keys by secret hash, kept in memory for the auth path, across hosts.
//!
//! Other hosts write keys too, so this process's own writes are not enough
//! to invalidate. Every key write sends `NOTIFY gatehouse_keys` in its
//! transaction (PostgreSQL delivers it at commit, to every listener); each
//! host keeps one connection listening ([`super::listen`]) and bumps the
//! generation on every notification, as the redb cache does on its own
//! writes. An entry read under an older generation is never trusted.
//!
//! The bound: a key revoked on one host is refused on every other host as
//! soon as the notification arrives (milliseconds on a healthy database),
//! and in any case within [`TTL`]: an entry is trusted only while the
//! listener is connected and for at most [`TTL`] after it was read. A lost
//! listener connection empties the cache and turns it off until it is back
//! (with a fresh generation), so a notification missed while disconnected
//! cannot leave a revoked key cached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::KeyHash;
use crate::model::ApiKeyRecord;

/// Longest time a cached key is trusted, notification or not.
pub const TTL: Duration = Duration::from_secs(1);

/// Keys kept; a deployment with more active keys re-reads some.
const MAX_ENTRIES: usize = 16_384;

/// A record and the generation and time it was read at.
type Entry = (u64, Instant, Arc<ApiKeyRecord>);

#[derive(Default)]
pub struct KeyCache {
    generation: AtomicU64,
    listening: AtomicBool,
    entries: Mutex<HashMap<KeyHash, Entry>>,
}

impl KeyCache {
    /// The generation to read under: take it before reading the database.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached record, if the listener is up and it was read under the
    /// current generation less than [`TTL`] ago.
    pub fn get(&self, hash: &KeyHash) -> Option<Arc<ApiKeyRecord>> {
        if !self.listening.load(Ordering::Acquire) {
            return None;
        }
        let current = self.generation();
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(hash).filter(|(g, at, _)| *g == current && at.elapsed() < TTL).map(|(_, _, k)| k.clone())
    }

    /// Remember a record read from the database under `generation`.
    pub fn put(&self, hash: KeyHash, generation: u64, record: Arc<ApiKeyRecord>) {
        if !self.listening.load(Ordering::Acquire) {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&hash) {
            entries.clear();
        }
        entries.insert(hash, (generation, Instant::now(), record));
    }

    /// A key changed somewhere in the fleet (or may have): trust nothing read before.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The listener connected (`true`) or was lost (`false`); either way
    /// nothing read before is trusted.
    pub fn set_listening(&self, up: bool) {
        self.listening.store(up, Ordering::Release);
        self.invalidate();
    }

    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Arc<ApiKeyRecord> {
        Arc::new(ApiKeyRecord {
            id: "key_1".into(),
            user_id: "usr_1".into(),
            name: "one".into(),
            hash: KeyHash::of("sk-one"),
            prefix: "sk-one".into(),
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
    fn nothing_is_cached_while_the_listener_is_down() {
        let cache = KeyCache::default();
        let h = KeyHash::of("sk-one");
        cache.put(h, cache.generation(), record());
        assert!(cache.get(&h).is_none(), "no listener: no cache");
        cache.set_listening(true);
        cache.put(h, cache.generation(), record());
        assert!(cache.get(&h).is_some());
        cache.set_listening(false);
        assert!(cache.get(&h).is_none(), "a lost listener may have missed a revoke");
    }

    #[test]
    fn an_entry_read_before_a_notification_is_never_trusted_after_it() {
        let cache = KeyCache::default();
        cache.set_listening(true);
        let h = KeyHash::of("sk-one");
        let g = cache.generation();
        cache.invalidate();
        cache.put(h, g, record());
        assert!(cache.get(&h).is_none());
    }

    #[test]
    fn an_entry_is_trusted_for_at_most_the_ttl() {
        let cache = KeyCache::default();
        cache.set_listening(true);
        let h = KeyHash::of("sk-one");
        let old = Instant::now().checked_sub(TTL).expect("an instant one TTL ago");
        cache.entries.lock().expect("lock").insert(h, (cache.generation(), old, record()));
        assert!(cache.get(&h).is_none(), "older than the TTL");
    }
}
