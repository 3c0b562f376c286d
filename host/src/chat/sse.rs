//! Incremental Server-Sent Events decoder for upstream streams.
//!
//! Follows the WHATWG "event stream interpretation" rules
//! (<https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>):
//! lines end in CRLF, LF or CR; `event:`, `data:`, `id:` and `retry:` fields;
//! one optional space after the colon is dropped; several `data:` lines are
//! joined with `\n`; lines starting with `:` are comments; a blank line
//! dispatches the event, unless no `data:` line was seen; a leading BOM is
//! ignored; unknown fields are ignored.
//!
//! Bytes arrive in arbitrary chunks: a line, a CRLF pair or a UTF-8 sequence
//! may be split anywhere. Lines are decoded only once complete (CR and LF
//! never occur inside a UTF-8 sequence), so split characters need no special
//! care; invalid UTF-8 becomes U+FFFD as the spec's decoder does.
//!
//! Two deliberate choices beyond the spec:
//! - **Size guard.** An event (its pending `data`, `event` and unfinished
//!   line) larger than the limit (default [`DEFAULT_MAX_EVENT_BYTES`]) is an
//!   [`SseError::EventTooLarge`], so a broken or hostile upstream cannot make
//!   the host buffer without bound.
//! - **End of stream.** [`SseDecoder::finish`] treats the end of input as the
//!   end of the last line and of the last event, and dispatches it, where the
//!   spec would drop an event that lacks its final blank line. The adapters
//!   parse every event and reject a truncated one as malformed, and a server
//!   that forgets the blank line after `data: [DONE]` still ends cleanly.
//!
//! Why not a crate: `eventsource-stream` wraps a `Stream` of bytes rather than
//! offering a push API, and buffers without a size limit; the decoder is
//! small enough to own and test exhaustively here.

use std::fmt;
use std::time::Duration;

/// Default limit for one event: 1 MiB. Chat stream events are a few hundred
/// bytes; this leaves room for large tool-call arguments.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the event had none (the spec's
    /// default type, `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream so far (it carries over to later
    /// events, as the spec says); `None` when unset or reset to empty.
    pub id: Option<String>,
}

/// Why the stream cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// One event grew beyond the decoder's limit.
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::EventTooLarge { limit } => {
                write!(f, "a server-sent event is larger than the limit of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for SseError {}

/// Turns a byte stream into [`SseEvent`]s, one chunk at a time.
///
/// ```
/// # use gatehouse::chat::sse::{SseDecoder, SseError};
/// # fn main() -> Result<(), SseError> {
/// let mut dec = SseDecoder::new();
/// let mut events = dec.push(b"data: hel")?; // nothing yet
/// assert!(events.is_empty());
/// events.extend(dec.push(b"lo\n\n")?); // one event, data "hello"
/// events.extend(dec.finish()?); // at end of input
/// assert_eq!(events.len(), 1);
/// assert_eq!(events[0].data, "hello");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF of the next one belongs to it.
    after_cr: bool,
    /// Still at the very first line (where a BOM is dropped).
    first_line: bool,
    event_type: String,
    /// Joined `data:` lines, each followed by `\n` (the spec's data buffer).
    data: String,
    /// Whether a `data:` field was seen for the pending event.
    has_data: bool,
    last_event_id: String,
    retry: Option<Duration>,
    max_event_bytes: usize,
    /// Set once the limit was exceeded; the stream is unusable after that.
    failed: Option<SseError>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default event size limit.
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder that fails on events larger than `limit` bytes.
    pub fn with_max_event_bytes(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            event_type: String::new(),
            data: String::new(),
            has_data: false,
            last_event_id: String::new(),
            retry: None,
            max_event_bytes: limit,
            failed: None,
        }
    }

    /// The last event id seen (the spec's "last event ID buffer"); empty if none.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time of the last valid `retry:` field, if any.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Feed the next chunk; returns the events it completed, in order.
    ///
    /// # Errors
    /// [`SseError::EventTooLarge`] when the pending event outgrows the limit.
    /// After an error the decoder keeps returning it: drop the stream.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (line, ending) = (&rest[..pos], rest[pos]);
            if self.line.is_empty() {
                self.check_size(line.len())?;
                self.process_line(line, &mut events)?;
            } else {
                self.check_size(line.len())?;
                let mut whole = std::mem::take(&mut self.line);
                whole.extend_from_slice(line);
                let result = self.process_line(&whole, &mut events);
                whole.clear();
                self.line = whole; // keep the allocation
                result?;
            }
            rest = &rest[pos + 1..];
            if ending == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.check_size(rest.len())?;
        self.line.extend_from_slice(rest);
        Ok(events)
    }

    /// End of input: the unterminated last line and the pending event are
    /// processed as if the stream had ended with a blank line (see the module
    /// docs), and the decoder is reset for a new stream.
    ///
    /// # Errors
    /// The error of an earlier [`push`](Self::push), or the size limit.
    pub fn finish(&mut self) -> Result<Vec<SseEvent>, SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut events = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut events)?;
        }
        self.process_line(b"", &mut events)?;
        *self = Self::with_max_event_bytes(self.max_event_bytes);
        Ok(events)
    }

    /// Fail if the pending event plus `incoming` more bytes exceed the limit.
    fn check_size(&mut self, incoming: usize) -> Result<(), SseError> {
        let pending = self.line.len() + self.data.len() + self.event_type.len();
        if pending.saturating_add(incoming) > self.max_event_bytes {
            let err = SseError::EventTooLarge { limit: self.max_event_bytes };
            self.failed = Some(err.clone());
            return Err(err);
        }
        Ok(())
    }

    /// Interpret one complete line (without its line ending).
    fn process_line(&mut self, mut line: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.first_line {
            self.first_line = false;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"event" => {
                // Decoding may grow the value (one invalid byte becomes three
                // of U+FFFD): check what is kept (found by the `sse_decoder`
                // fuzz target).
                self.event_type = decode(value);
                self.check_size(0)?;
            }
            b"data" => {
                self.data.push_str(&decode(value));
                self.data.push('\n');
                self.has_data = true;
                self.check_size(0)?;
            }
            // An id containing NUL is ignored (the spec's rule).
            b"id" if !value.contains(&0) => self.last_event_id = decode(value),
            // Digits only; a value that overflows u64 is ignored as well.
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(ms) = decode(value).parse::<u64>() {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A blank line: emit the pending event if it has data, then reset it.
    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event_type);
        let mut data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        data.pop(); // the `\n` after the last data line
        let id = (!self.last_event_id.is_empty()).then(|| self.last_event_id.clone());
        events.push(SseEvent { event, data, id });
    }
}

/// UTF-8 with U+FFFD for invalid sequences, as the spec's decoder.
fn decode(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests;
