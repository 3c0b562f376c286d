//! HTML to title + heading sections, in one linear pass.
//!
//! A small scanner rather than a DOM: the index only needs the text, the
//! `<title>` and the `<h1>`…`<h6>` headings, and the scanner handles what
//! breaks light DOM parsers on real pages: `<script>`/`<style>` bodies that
//! contain `<` or `</div>` are skipped up to their own end tag, quoted `>`
//! inside attributes does not end a tag, comments and doctype are dropped,
//! and unclosed tags cannot nest deeply (no recursion, so no stack overflow
//! in the guest). Entities are decoded by `html-escape` (all HTML5 named
//! entities and numeric references). Whitespace is collapsed except in `<pre>`.
//! Navigation (`<nav>`) is dropped as boilerplate.

use crate::extract::Builder;

/// Elements whose content is never text.
const SKIP: &[&str] = &["script", "style", "noscript", "template", "svg", "math", "nav", "iframe", "object", "select", "canvas"];

/// Elements that end a paragraph.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "ul",
    "ol",
    "dl",
    "table",
    "pre",
    "blockquote",
    "figure",
    "figcaption",
    "form",
    "fieldset",
    "hr",
    "details",
    "summary",
    "body",
    "html",
    "address",
];

/// Elements that end a line.
const LINE: &[&str] = &["br", "li", "tr", "dt", "dd", "caption", "option"];

enum Capture {
    Title(String),
    Heading(u8, String),
}

/// Parses an HTML page.
pub(crate) fn parse(html: &str) -> Builder {
    let mut b = Builder::default();
    let bytes = html.as_bytes();
    let mut i = 0;
    let mut text_from = 0;
    let mut capture: Option<Capture> = None;
    let mut pre = 0u32;
    while let Some(off) = memchr(b'<', &bytes[i..]) {
        let lt = i + off;
        emit(&mut b, &mut capture, &html[text_from..lt], pre > 0);
        let Some(tag) = scan_tag(bytes, lt) else {
            // A lone '<' is text.
            emit(&mut b, &mut capture, "<", pre > 0);
            i = lt + 1;
            text_from = i;
            continue;
        };
        i = tag.end;
        text_from = i;
        let name = tag.name.as_str();
        if !tag.closing && SKIP.contains(&name) {
            i = find_end_tag(bytes, i, name).unwrap_or(bytes.len());
            text_from = i;
            continue;
        }
        match (name, tag.closing) {
            ("title", false) => capture = Some(Capture::Title(String::new())),
            ("title", true) => {
                if let Some(Capture::Title(t)) = capture.take()
                    && b.title.is_empty()
                {
                    b.title = crate::extract::collapse_spaces(&t);
                }
            }
            ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", closing) => {
                let level = name.as_bytes()[1] - b'0';
                if let Some(Capture::Heading(l, t)) = capture.take() {
                    b.heading(l, &t);
                }
                if !closing {
                    capture = Some(Capture::Heading(level, String::new()));
                }
            }
            ("pre", false) => {
                pre += 1;
                b.block_break();
            }
            ("pre", true) => {
                pre = pre.saturating_sub(1);
                b.block_break();
            }
            ("td" | "th", true) => emit(&mut b, &mut capture, " | ", false),
            (n, _) if BLOCK.contains(&n) => b.block_break(),
            (n, _) if LINE.contains(&n) => match &mut capture {
                Some(Capture::Title(t) | Capture::Heading(_, t)) => t.push(' '),
                None => b.line_break(),
            },
            _ => {}
        }
    }
    emit(&mut b, &mut capture, &html[text_from..], pre > 0);
    if let Some(Capture::Heading(l, t)) = capture {
        b.heading(l, &t);
    }
    b
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

fn emit(b: &mut Builder, capture: &mut Option<Capture>, raw: &str, pre: bool) {
    if raw.is_empty() {
        return;
    }
    let text = html_escape::decode_html_entities(raw);
    match capture {
        Some(Capture::Title(t) | Capture::Heading(_, t)) => t.push_str(&text),
        None if pre => b.push(&text),
        None => b.push_inline(&text),
    }
}

struct TagToken {
    /// Lower-cased element name; empty for comments, doctype, processing instructions.
    name: String,
    closing: bool,
    /// Index after the tag.
    end: usize,
}

/// The tag starting at `bytes[lt] == b'<'`, or `None` if it is not markup.
fn scan_tag(bytes: &[u8], lt: usize) -> Option<TagToken> {
    let rest = &bytes[lt..];
    if rest.starts_with(b"<!--") {
        let end = find(bytes, lt + 4, b"-->").map_or(bytes.len(), |p| p + 3);
        return Some(TagToken { name: String::new(), closing: false, end });
    }
    if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
        let end = memchr(b'>', rest).map_or(bytes.len(), |p| lt + p + 1);
        return Some(TagToken { name: String::new(), closing: false, end });
    }
    let mut j = lt + 1;
    let closing = bytes.get(j) == Some(&b'/');
    if closing {
        j += 1;
    }
    let name_start = j;
    while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'-' || bytes[j] == b':') {
        j += 1;
    }
    if j == name_start || !bytes[name_start].is_ascii_alphabetic() {
        return None;
    }
    let name = String::from_utf8_lossy(&bytes[name_start..j]).to_ascii_lowercase();
    // Attributes: a quoted value may contain '>'.
    let mut quote: Option<u8> = None;
    while j < bytes.len() {
        let c = bytes[j];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'>' => return Some(TagToken { name, closing, end: j + 1 }),
            None => {}
        }
        j += 1;
    }
    Some(TagToken { name, closing, end: bytes.len() })
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| from + p)
}

/// Index after the end tag `</name …>` at or after `from` (ASCII case-insensitive).
fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
    let mut k = from;
    while let Some(p) = find(bytes, k, b"</") {
        let after = p + 2;
        let candidate = bytes.get(after..after + name.len())?;
        let boundary = bytes.get(after + name.len()).is_none_or(|c| !c.is_ascii_alphanumeric());
        if candidate.eq_ignore_ascii_case(name.as_bytes()) && boundary {
            return Some(memchr(b'>', &bytes[after..]).map_or(bytes.len(), |q| after + q + 1));
        }
        k = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::extract::{Section, parse};

    #[test]
    fn strips_tags_scripts_styles_and_keeps_title_and_headings() {
        let html = r#"<!DOCTYPE html><html><head><title>Gate &amp; House</title>
            <style>h1 { color: red } p > a {}</style>
            <script>if (a < b && "</div>") { x = "<h1>fake</h1>"; }</script></head>
            <body><nav><a href="/">Home</a> <a href="/x">Menu</a></nav>
            <h1 class="t">Policies</h1><p>A policy <b>decides</b>
               who may   call&nbsp;what.</p><!-- <h2>hidden</h2> -->
            <h2 id='a>b'>Limits</h2><ul><li>60 per minute</li><li>100 per day</li></ul>
            <pre>line 1
  line 2</pre><SCRIPT type="x">var s = "</scriptx>";</SCRIPT>Tail 3 &lt; 4.</body></html>"#;
        let p = parse("p.html", html).expect("html");
        assert_eq!(p.title, "Gate & House");
        assert_eq!(
            p.sections,
            [
                Section { heading: "Policies".into(), text: "A policy decides who may call what.".into() },
                Section {
                    heading: "Policies › Limits".into(),
                    text: "60 per minute\n100 per day\n\nline 1\n  line 2\n\nTail 3 < 4.".into()
                },
            ]
        );
    }

    #[test]
    fn broken_markup_does_not_panic() {
        for html in ["<", "<<<>>>", "<p", "<script>never closed", "<h2>open heading", "</", "<!--", "a < b > c", "<a href='x>"] {
            let p = parse("x.htm", html).expect("html");
            assert!(p.sections.len() <= 1, "{html}: {p:?}");
        }
        let p = parse("x.htm", "<h2>open heading").expect("html");
        assert_eq!(p.title, "open heading");
        let deep = "<div>".repeat(100_000) + "deep text";
        let p = parse("deep.html", &deep).expect("html");
        assert_eq!(p.sections[0].text, "deep text");
    }
}
