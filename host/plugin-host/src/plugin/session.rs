//! Provider sessions: one instance held across the calls of one attempt,
//! within a process-wide share of the instance pool.

use super::*;

/// One provider instance for the calls of one attempt: `build-request`, then
/// `parse-response` or every `parse-stream-event` of the stream. Instantiated
/// at the first call, so each further call costs only the call. It belongs to
/// one request and is dropped with it (DESIGN: a fresh store per request, not
/// per call); after a fault it is dropped and later calls of the attempt get
/// fresh instances, like a poisoned warm retriever.
///
/// An instance held across the upstream wait keeps a pooling-allocator slot
/// for as long as the answer or stream takes. So at most
/// [`crate::engine::PROVIDER_SESSIONS`] attempts hold one at a time (half
/// the pool): an attempt that finds none free makes each call on a fresh
/// instance, as before, and the other half of the pool stays for everyone's
/// per-call instances (policy, Prompt Shield, PII/DLP) however many streams
/// are open.
pub struct ProviderSession {
    plugin: Arc<Plugin>,
    held: Held,
}

enum Held {
    /// No call yet: the first one tries to take a session slot.
    NotYet,
    /// The attempt's instance and its session slot.
    Live { store: Store<CallState>, instance: bindings::provider::Provider, _slot: SessionSlot },
    /// No slot was free, or the instance faulted: every call gets a fresh instance.
    PerCall,
}

/// Sessions holding an instance now, across every engine of the process.
static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// One of the [`crate::engine::PROVIDER_SESSIONS`] slots; given back on drop.
struct SessionSlot;

impl SessionSlot {
    fn take() -> Option<SessionSlot> {
        let cap = crate::engine::PROVIDER_SESSIONS as u64;
        SESSIONS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < cap).then_some(n + 1)).ok().map(|_| SessionSlot)
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        SESSIONS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Provider sessions holding an instance now (`gatehouse_plugin_provider_sessions`).
pub fn provider_sessions_held() -> u64 {
    SESSIONS.load(Ordering::Acquire)
}

impl Plugin {
    /// A [`ProviderSession`] of this provider; nothing is instantiated until its first call.
    pub fn provider_session(self: &Arc<Self>) -> Result<ProviderSession, PluginError> {
        if !matches!(self.pre, Pre::Provider(_)) {
            return Err(self.wrong_kind(Kind::Provider));
        }
        Ok(ProviderSession { plugin: self.clone(), held: Held::NotYet })
    }
}

impl ProviderSession {
    /// Does this attempt hold its own instance now?
    pub fn holds_instance(&self) -> bool {
        matches!(self.held, Held::Live { .. })
    }

    /// One call: on the held instance (instantiated now if this is the first
    /// call and a slot is free) with a fresh CPU deadline and log budget, or
    /// on a fresh instance.
    fn call<R>(
        &mut self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &bindings::provider::Provider) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let plugin = self.plugin.clone();
        let Pre::Provider(pre) = &plugin.pre else {
            return Err(plugin.wrong_kind(Kind::Provider));
        };
        if matches!(self.held, Held::NotYet) {
            self.held = Held::PerCall;
            if let Some(slot) = SessionSlot::take() {
                let mut store = plugin.store()?;
                let started = Instant::now();
                let r = drive(async {
                    let instance = pre.instantiate_async(&mut store).await?;
                    let out = f(&mut store, &instance).await;
                    Ok((instance, out))
                });
                // The first call's recorded time includes the instantiation,
                // so the statistics count calls, as per-call instances do.
                return match r {
                    Ok((instance, out)) => {
                        let out = plugin.finish(&store, started, out);
                        if out.is_ok() {
                            self.held = Held::Live { store, instance, _slot: slot };
                        }
                        out
                    }
                    Err(e) => plugin.finish(&store, started, Err(e)),
                };
            }
        }
        match &mut self.held {
            Held::Live { store, instance, .. } => {
                store.data_mut().begin_call();
                set_deadline(store, plugin.grants.load().deadline_ticks);
                let started = Instant::now();
                let r = drive(f(store, instance));
                let out = plugin.finish(store, started, r);
                if out.is_err() {
                    // Its memory may be half-updated: never call it again.
                    self.held = Held::PerCall;
                }
                out
            }
            _ => plugin.provider(f),
        }
    }

    /// `build-request`: the HTTP request to send upstream (or the adapter's own error).
    pub fn build_request(
        &mut self,
        up: &provider_calls::Upstream,
        req: &provider_calls::ChatRequest,
    ) -> Result<Result<provider_calls::HttpRequest, provider_calls::ProviderError>, PluginError> {
        self.call(async |s, i| i.gatehouse_plugin_provider_api().call_build_request(s, up, req).await)
    }

    /// `parse-response`: a complete upstream response of any status → completion or classified error.
    pub fn parse_response(
        &mut self,
        up: &provider_calls::Upstream,
        status: u16,
        body: &str,
    ) -> Result<Result<provider_calls::Completion, provider_calls::ProviderError>, PluginError> {
        self.call(async |s, i| i.gatehouse_plugin_provider_api().call_parse_response(s, up, status, body).await)
    }

    /// `parse-stream-event`: one SSE event with the state the previous event returned ("" first).
    pub fn parse_stream_event(
        &mut self,
        up: &provider_calls::Upstream,
        state: &str,
        ev: &provider_calls::StreamEvent,
    ) -> Result<Result<provider_calls::StreamOutput, provider_calls::ProviderError>, PluginError> {
        self.call(async |s, i| i.gatehouse_plugin_provider_api().call_parse_stream_event(s, up, state, ev).await)
    }
}
