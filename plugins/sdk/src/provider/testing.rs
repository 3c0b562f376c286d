//! Helpers for a provider adapter's native unit tests.

use super::{ErrorClass, StreamEvent, Upstream};

/// An upstream at `base_url` with an optional key and plugin config.
pub fn upstream(base_url: &str, key: Option<&str>, config: &str) -> Upstream {
    Upstream { base_url: base_url.to_string(), api_key: key.map(str::to_string), config_json: config.to_string() }
}

/// The WIT name of an error class (`rate-limit`, …), for short assertions.
pub fn class_name(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Timeout => "timeout",
        ErrorClass::ServerError => "server-error",
        ErrorClass::RateLimit => "rate-limit",
        ErrorClass::ClientError => "client-error",
    }
}

/// Split a recorded SSE transcript (a fixture file) into the events the
/// host would hand over. Enough for fixtures whose events have an optional
/// `event:` line and one `data:` line; the host's own decoder handles the
/// rest of the SSE format (multi-line data, comments, `\r\n`).
pub fn sse_events(transcript: &str) -> Vec<StreamEvent> {
    transcript
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut ev = StreamEvent { event: String::new(), data: String::new() };
            for line in block.lines() {
                if let Some(d) = line.strip_prefix("data: ") {
                    ev.data = d.to_string();
                } else if let Some(e) = line.strip_prefix("event: ") {
                    ev.event = e.to_string();
                }
            }
            ev
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_splits_blocks_and_reads_event_and_data() {
        let evs = sse_events("event: ping\ndata: {}\n\ndata: {\"a\":1}\n\n\n\ndata: [DONE]\n\n");
        let got: Vec<(&str, &str)> = evs.iter().map(|e| (e.event.as_str(), e.data.as_str())).collect();
        assert_eq!(got, [("ping", "{}"), ("", "{\"a\":1}"), ("", "[DONE]")]);
    }
}
