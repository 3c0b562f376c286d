//! Plugin events to the log, the metrics and the audit trail
//! (`plugin_management`). Events come from loader threads; a bounded queue
//! hands them to a task that appends them (a full queue drops the audit
//! record, never blocks a load, and says so in the log).

use std::sync::Arc;

use tokio::sync::mpsc;

use gatehouse_plugin_host::{PluginAction, PluginEvent, PluginEventSink, log_event};
use gatehouse_store::Store;
use gatehouse_store::audit::{Audit, category, kind, outcome};
use gatehouse_store::model::Severity;

pub struct AuditSink {
    tx: mpsc::Sender<PluginEvent>,
}

impl AuditSink {
    pub fn start(store: Arc<dyn Store>) -> Arc<Self> {
        let (tx, mut rx) = mpsc::channel::<PluginEvent>(1024);
        #[expect(
            clippy::disallowed_methods,
            reason = "ends when the sink is dropped (its channel closes); plugin events are best effort, like log lines"
        )]
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                let failed = e.action == PluginAction::Failed;
                let mut a = Audit::new(
                    kind::PLUGIN_MANAGEMENT,
                    category::SYSTEM_INTEGRITY,
                    format!("Plugin {} {}: {}", e.plugin, e.action.as_str(), e.message),
                )
                .severity(if failed { Severity::Error } else { Severity::Info })
                .outcome(if failed { outcome::FAILURE } else { outcome::SUCCESS })
                .meta("operation", format!("plugin_{}", e.action.as_str()))
                .meta("plugin", e.plugin.clone())
                .meta("source", e.source.clone());
                if let Some(k) = e.kind {
                    a = a.meta("kind", k.as_str());
                }
                if let Some(h) = &e.sha256 {
                    a = a.meta("sha256", h.clone());
                }
                if let Err(err) = store.append_audit(vec![a.build()]).await {
                    tracing::error!(error = %err, "auditing a plugin event failed");
                }
            }
        });
        Arc::new(AuditSink { tx })
    }
}

impl PluginEventSink for AuditSink {
    fn event(&self, e: PluginEvent) {
        log_event(&e);
        if self.tx.try_send(e).is_err() {
            tracing::warn!("plugin audit queue full; an audit record was dropped");
        }
    }
}
