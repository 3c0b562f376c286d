//! Unit tests of the SSE decoder: the WHATWG rules one by one, chunking at
//! every possible boundary, and the size guard.

use super::*;

fn ev(event: &str, data: &str) -> SseEvent {
    SseEvent { event: event.to_string(), data: data.to_string(), id: None }
}

/// Decode `input` in one push plus `finish`.
fn decode_all(input: &[u8]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = d.push(input).expect("push");
    out.extend(d.finish().expect("finish"));
    out
}

/// Decode `input` cut into the given pieces.
fn decode_pieces(pieces: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for p in pieces {
        out.extend(d.push(p).expect("push"));
    }
    out.extend(d.finish().expect("finish"));
    out
}

const OPENAI: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Grüße 😀\"},\"finish_reason\":null}]}\n\n",
    ": keep-alive\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);

const ANTHROPIC: &str = concat!(
    "event: message_start\r\n",
    "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\r\n\r\n",
    "event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"naïve ☕\"}}\r\n\r\n",
    "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n",
);

/// A stream that uses every feature: BOM, all three line endings, multi-line
/// data, comments, ids, retry, unknown fields, events without data, and
/// multi-byte characters.
const MIXED: &str = "\u{FEFF}: hello\r\nretry: 1500\nid: 7\revent: greet\r\ndata: Grüß\ndata:dich 😀\r\nfoo: bar\n\n\
event: empty\n\ndata\n\rid\ndata:  two\r\r:\ndata: end";

#[test]
fn one_event() {
    assert_eq!(decode_all(b"data: hello\n\n"), vec![ev("", "hello")]);
}

#[test]
fn multi_line_data_is_joined_with_newlines() {
    assert_eq!(decode_all(b"data: a\ndata: b\ndata:\ndata: c\n\n"), vec![ev("", "a\nb\n\nc")]);
}

#[test]
fn event_type_applies_to_one_event_only() {
    let got = decode_all(b"event: add\ndata: 1\n\ndata: 2\n\n");
    assert_eq!(got, vec![ev("add", "1"), ev("", "2")]);
}

#[test]
fn only_one_leading_space_is_dropped() {
    assert_eq!(decode_all(b"data:x\n\ndata:  y\n\ndata: \n\n"), vec![ev("", "x"), ev("", " y"), ev("", "")]);
}

#[test]
fn field_without_colon_has_empty_value() {
    assert_eq!(decode_all(b"data\n\n"), vec![ev("", "")]);
    assert_eq!(decode_all(b"data\ndata\n\n"), vec![ev("", "\n")]);
}

#[test]
fn comments_and_unknown_fields_are_ignored() {
    assert_eq!(decode_all(b": ping\n:\nfoo: bar\nDATA: no\ndata: yes\n\n"), vec![ev("", "yes")]);
}

#[test]
fn blank_line_without_data_dispatches_nothing() {
    assert_eq!(decode_all(b"event: x\n\n: c\n\n\n\n"), Vec::<SseEvent>::new());
    // ... and the dropped event's type does not leak into the next one.
    assert_eq!(decode_all(b"event: x\n\ndata: d\n\n"), vec![ev("", "d")]);
}

#[test]
fn all_line_endings() {
    let want = vec![ev("e", "1"), ev("", "2"), ev("", "3")];
    assert_eq!(decode_all(b"event: e\r\ndata: 1\r\n\r\ndata: 2\n\ndata: 3\r\r"), want);
}

#[test]
fn crlf_split_across_chunks_is_one_line_ending() {
    // Were the LF taken as a second line ending, the blank line would
    // dispatch `a` alone.
    let got = decode_pieces(&[b"data: a\r", b"\ndata: b\r\n\r\n"]);
    assert_eq!(got, vec![ev("", "a\nb")]);
    let got = decode_pieces(&[b"data: a\r", b"", b"\ndata: b\r", b"\r\n"]);
    assert_eq!(got, vec![ev("", "a\nb")]);
}

#[test]
fn ids_carry_over_and_reset() {
    let mut d = SseDecoder::new();
    let got = d.push(b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: x\0y\ndata: d\n\n").expect("push");
    let ids: Vec<Option<&str>> = got.iter().map(|e| e.id.as_deref()).collect();
    assert_eq!(ids, [Some("1"), Some("1"), None, None]);
    assert_eq!(d.last_event_id(), "");
    d.push(b"id: 42\n\n").expect("push");
    assert_eq!(d.last_event_id(), "42", "an id without data still sets the last id");
}

#[test]
fn retry_accepts_only_digits() {
    let mut d = SseDecoder::new();
    d.push(b"retry: 2500\n\n").expect("push");
    assert_eq!(d.retry(), Some(Duration::from_millis(2500)));
    d.push(b"retry: 1s\nretry: -1\nretry:\nretry: 99999999999999999999999\n\n").expect("push");
    assert_eq!(d.retry(), Some(Duration::from_millis(2500)));
}

#[test]
fn bom_is_dropped_only_at_the_start() {
    assert_eq!(decode_all("\u{FEFF}data: a\n\n".as_bytes()), vec![ev("", "a")]);
    let got = decode_all("data: a\n\n\u{FEFF}data: b\n\n".as_bytes());
    assert_eq!(got, vec![ev("", "a")], "a later BOM makes the field name unknown");
    let got = decode_pieces(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]);
    assert_eq!(got, vec![ev("", "a")]);
}

#[test]
fn invalid_utf8_becomes_replacement_characters() {
    assert_eq!(decode_all(b"data: a\xFFb\n\n"), vec![ev("", "a\u{FFFD}b")]);
}

#[test]
fn finish_dispatches_the_pending_event_and_resets() {
    let mut d = SseDecoder::new();
    assert!(d.push(b"data: [DONE]\n").expect("push").is_empty());
    assert_eq!(d.finish().expect("finish"), vec![ev("", "[DONE]")]);
    assert!(d.push(b"data: x").expect("push").is_empty());
    assert_eq!(d.finish().expect("finish"), vec![ev("", "x")], "unterminated last line");
    assert!(d.finish().expect("finish").is_empty());
    assert!(decode_all(b"").is_empty());
    assert!(decode_all(b": only a comment").is_empty());
}

#[test]
fn realistic_streams() {
    let got = decode_all(OPENAI.as_bytes());
    assert_eq!(got.len(), 4);
    assert!(got[1].data.contains("Grüße 😀"));
    assert_eq!(got[3], ev("", "[DONE]"));
    let got = decode_all(ANTHROPIC.as_bytes());
    let types: Vec<&str> = got.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(types, ["message_start", "ping", "content_block_delta", "message_stop"]);
    assert!(got[2].data.contains("naïve ☕"));
}

#[test]
fn mixed_stream() {
    let mut d = SseDecoder::new();
    let mut got = d.push(MIXED.as_bytes()).expect("push");
    assert_eq!(d.retry(), Some(Duration::from_millis(1500)));
    got.extend(d.finish().expect("finish"));
    let want = vec![
        SseEvent { event: "greet".into(), data: "Grüß\ndich 😀".into(), id: Some("7".into()) },
        SseEvent { event: String::new(), data: String::new(), id: Some("7".into()) },
        SseEvent { event: String::new(), data: " two".into(), id: None },
        SseEvent { event: String::new(), data: "end".into(), id: None },
    ];
    assert_eq!(got, want);
}

/// Every way to cut a stream in two, and one byte at a time, yields the
/// same events as one push.
#[test]
fn every_split_point_yields_the_same_events() {
    for sample in [OPENAI, ANTHROPIC, MIXED] {
        let bytes = sample.as_bytes();
        let want = decode_all(bytes);
        assert!(!want.is_empty());
        for i in 0..=bytes.len() {
            assert_eq!(decode_pieces(&[&bytes[..i], &bytes[i..]]), want, "split at {i}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode_pieces(&singles), want, "byte by byte");
    }
}

/// Every way to cut the mixed sample in three.
#[test]
fn every_pair_of_split_points_yields_the_same_events() {
    let bytes = MIXED.as_bytes();
    let want = decode_all(bytes);
    for i in 0..=bytes.len() {
        for j in i..=bytes.len() {
            assert_eq!(decode_pieces(&[&bytes[..i], &bytes[i..j], &bytes[j..]]), want, "splits at {i}, {j}");
        }
    }
}

/// Chunk sizes 1..=7 over the realistic samples, cycling.
#[test]
fn irregular_chunk_sizes() {
    for sample in [OPENAI, ANTHROPIC] {
        let bytes = sample.as_bytes();
        let want = decode_all(bytes);
        for seed in 1..=7usize {
            let mut pieces = Vec::new();
            let (mut at, mut size) = (0, seed);
            while at < bytes.len() {
                let end = (at + size).min(bytes.len());
                pieces.push(&bytes[at..end]);
                at = end;
                size = size % 7 + 1;
            }
            assert_eq!(decode_pieces(&pieces), want, "seed {seed}");
        }
    }
}

#[test]
fn an_event_over_the_limit_is_an_error() {
    let mut d = SseDecoder::with_max_event_bytes(16);
    assert_eq!(d.push(b"data: 0123456789\n\n").expect("10 bytes + newline fit"), vec![ev("", "0123456789")]);
    let err = d.push(b"data: 01234567\ndata: 89abcdef\n").expect_err("over the limit");
    assert_eq!(err, SseError::EventTooLarge { limit: 16 });
    assert!(err.to_string().contains("16 bytes"));
    assert!(d.push(b"\n").is_err(), "the decoder stays failed");
    assert!(d.finish().is_err());
}

#[test]
fn an_event_type_that_grows_when_decoded_counts_toward_the_limit() {
    // `data: 0123` keeps 5 bytes, the `event:` line of 6 invalid bytes is
    // 12 on the wire (17 in all, under the limit) but 18 once decoded.
    let mut d = SseDecoder::with_max_event_bytes(20);
    assert_eq!(d.push(b"data: 0123\nevent:\xdc\xdc\xdc\xdc\xdc\xdc\n\n"), Err(SseError::EventTooLarge { limit: 20 }));
}

#[test]
fn an_endless_line_is_an_error_even_across_chunks() {
    let mut d = SseDecoder::with_max_event_bytes(64);
    let chunk = [b'x'; 20];
    let mut result = Ok(Vec::new());
    for _ in 0..4 {
        result = d.push(&chunk);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(SseError::EventTooLarge { limit: 64 }));
    let mut d = SseDecoder::with_max_event_bytes(64);
    assert!(d.push(&[b'y'; 100]).is_err(), "one big chunk");
}

#[test]
fn the_limit_counts_one_event_not_the_stream() {
    let mut d = SseDecoder::with_max_event_bytes(32);
    for _ in 0..1000 {
        assert_eq!(d.push(b"data: twenty bytes of data\n\n").expect("fits").len(), 1);
    }
}

#[test]
fn default_decoder_uses_default_limit() {
    let mut d = SseDecoder::default();
    let big = format!("data: {}\n\n", "z".repeat(DEFAULT_MAX_EVENT_BYTES - 10));
    assert_eq!(d.push(big.as_bytes()).expect("fits").len(), 1);
    let too_big = format!("data: {}\n\n", "z".repeat(DEFAULT_MAX_EVENT_BYTES + 1));
    assert!(d.push(too_big.as_bytes()).is_err());
}
