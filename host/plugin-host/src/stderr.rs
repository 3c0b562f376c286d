//! A guest's stderr, kept in memory for the length of one call: a panicking
//! guest (Rust's panic message, the Python and JavaScript guest libraries'
//! one-line report of an uncaught error) writes there before it traps, and
//! the call's error carries that message instead of a bare "wasm
//! `unreachable` instruction executed". Bounded: the first [`CAPACITY`] bytes
//! are kept and later writes are accepted and dropped, so a chatty guest
//! neither grows the host's memory nor fails because of it.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Bytes of stderr kept per call.
pub const CAPACITY: usize = 4096;

/// One call's stderr; clones share the buffer.
#[derive(Clone, Default)]
pub struct GuestStderr(Arc<Mutex<Vec<u8>>>);

impl GuestStderr {
    fn push(&self, bytes: &[u8]) {
        let mut buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let room = CAPACITY.saturating_sub(buf.len());
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// What the guest wrote, lossily decoded.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// The panic report in what the guest wrote, as one line: the line with
    /// `panicked at` (Rust's `panicked at src/lib.rs:9:5:` is followed by
    /// its message on the next line, joined here), or else the last line
    /// written; `None` when the guest wrote nothing.
    pub fn panic_message(&self) -> Option<String> {
        panic_message(&self.text())
    }
}

/// See [`GuestStderr::panic_message`].
pub fn panic_message(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let line = match lines.iter().position(|l| l.contains("panicked at ")) {
        Some(i) => {
            let l = lines[i];
            let from = l.find("panicked at ").unwrap_or(0);
            let head = &l[from..];
            match lines.get(i + 1) {
                Some(next) if head.ends_with(':') && !next.starts_with("note:") => format!("{head} {next}"),
                _ => head.to_owned(),
            }
        }
        None => (*lines.last()?).to_owned(),
    };
    Some(line.chars().take(500).collect())
}

impl IsTerminal for GuestStderr {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStderr {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestStderr {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestStderr {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestStderr {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_panics_are_joined_with_their_message() {
        let text = "\nthread '<unnamed>' panicked at src/lib.rs:22:9:\nboom: 3\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(panic_message(text).as_deref(), Some("panicked at src/lib.rs:22:9: boom: 3"));
    }

    #[test]
    fn the_guest_libraries_one_line_report_wins_over_a_traceback() {
        let text =
            "panicked at app.py:14: ValueError: bad\nTraceback (most recent call last):\n  File \"app.py\", line 14\nValueError: bad\n";
        assert_eq!(panic_message(text).as_deref(), Some("panicked at app.py:14: ValueError: bad"));
    }

    #[test]
    fn without_a_report_the_last_line_is_the_message_and_silence_is_none() {
        assert_eq!(panic_message("one\ntwo\n\n").as_deref(), Some("two"));
        assert_eq!(panic_message(" \n"), None);
    }

    #[test]
    fn writes_past_the_capacity_are_dropped_not_refused() {
        let mut s = GuestStderr::default();
        assert!(s.write(Bytes::from(vec![b'a'; CAPACITY - 1])).is_ok());
        assert!(s.write(Bytes::from_static(b"bcd")).is_ok(), "a full buffer never fails the guest");
        let text = s.text();
        assert_eq!(text.len(), CAPACITY);
        assert!(text.ends_with("ab"));
    }
}
