//! The output side: the canary planted in the system context, and the scan of
//! the answer (JSON whole, streams as they go) for the canary and the placeholders to restore.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::chat::types::{Message, Role};
use gatehouse_store::audit::outcome;
use gatehouse_store::model::{AuditEntry, Severity};
use gatehouse_store::records::OutboxEvent;

/// Put the canary instruction into the system context.
pub fn plant_canary(messages: &mut Vec<Message>, instruction: &str) {
    match messages.first_mut() {
        Some(m) if m.role == Role::System => {
            m.content.push_str("\n\n");
            m.content.push_str(instruction);
        }
        _ => messages.insert(0, Message { role: Role::System, content: instruction.to_owned() }),
    }
}

/// Output checks over text that is final (a whole answer, or the part of a
/// stream past the hold-back): canary leak and PII restore.
#[derive(Debug, Default)]
pub struct OutputScan {
    pub leaked: bool,
}

impl Secured {
    /// Scan `text`: returns it with placeholders restored, and whether the canary appeared.
    pub fn scan_output(&self, text: &str) -> (String, bool) {
        let leaked = self.canary.as_deref().is_some_and(|c| text.contains(c));
        let mut out = text.to_owned();
        for (placeholder, original) in &self.restore {
            if out.contains(placeholder.as_str()) {
                out = out.replace(placeholder.as_str(), original);
            }
        }
        (out, leaked)
    }

    /// The event and audit record of a canary leak.
    pub fn canary_leak(&self, who: &Subject, withheld: bool) -> (OutboxEvent, AuditEntry) {
        (
            who.event("promptshield:canary:leaked", json!({"withheld": withheld})),
            who.audit(
                format!("Canary token leaked in model output{}", if withheld { "; output withheld" } else { "" }),
                if withheld { outcome::BLOCKED } else { outcome::DETECTED },
                Severity::Critical,
                json!({"operation": "canary_leak"}),
            ),
        )
    }
}

/// Streaming output scanner: releases text as soon as it cannot be part of
/// a pattern, and holds back only a tail that could still become one (so a
/// canary split across chunks is caught before any of it is sent, and a
/// placeholder split across chunks is restored whole). Ordinary text is never
/// delayed to the next chunk.
pub struct StreamScanner {
    guarded: Arc<Secured>,
    pending: String,
}

impl StreamScanner {
    pub fn new(guarded: Arc<Secured>) -> Self {
        StreamScanner { guarded, pending: String::new() }
    }

    /// Add a delta; returns text safe to send and whether a canary leaked.
    pub fn push(&mut self, delta: &str) -> (String, bool) {
        self.pending.push_str(delta);
        if self.guarded.canary.as_deref().is_some_and(|c| self.pending.contains(c)) {
            self.pending.clear();
            return (String::new(), true);
        }
        let mut cut = self.pending.len() - self.guarded.undecided_tail(&self.pending);
        // Never split a whole placeholder: release it entirely or not at all.
        for (p, _) in &self.guarded.restore {
            for (start, m) in self.pending.match_indices(p.as_str()) {
                if start < cut && cut < start + m.len() {
                    cut = start;
                }
            }
        }
        if cut == 0 {
            return (String::new(), false);
        }
        let keep = self.pending.split_off(cut);
        let release = std::mem::replace(&mut self.pending, keep);
        (self.guarded.scan_output(&release).0, false)
    }

    /// The end: scan and release the held tail.
    pub fn finish(&mut self) -> (String, bool) {
        let (restored, leaked) = self.guarded.scan_output(&self.pending);
        self.pending.clear();
        if leaked { (String::new(), true) } else { (restored, false) }
    }
}
