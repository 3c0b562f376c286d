//! From a file's text to a title and heading sections.
//!
//! - Markdown (`.md`, `.markdown`): CommonMark via `pulldown-cmark`; ATX and
//!   setext headings start sections; code, tables and lists keep their text;
//!   raw HTML and YAML front matter are dropped (a front-matter `title:` is
//!   used as the title).
//! - Plain text (`.txt`): a line underlined with a repeated `= - * ~ ^ # +`
//!   (reStructuredText / setext style) is a heading; the level follows the
//!   order in which underline characters first appear, as in reST.
//! - HTML (`.html`, `.htm`): see [`crate::html`].
//!
//! The title is the first level-1 heading (or `<title>`), else the first
//! heading, else the file name.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// One heading section: its heading path ("Guide › Install") and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The headings above and of this section, outermost first, joined by " › ".
    pub heading: String,
    /// The section's text, paragraphs separated by blank lines.
    pub text: String,
}

/// A parsed document.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// Document title.
    pub title: String,
    /// Sections in document order; sections without text are left out.
    pub sections: Vec<Section>,
}

/// The kinds of file the retriever reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.md`, `.markdown`
    Markdown,
    /// `.txt`
    Text,
    /// `.html`, `.htm`
    Html,
}

impl Format {
    /// The format of a path, from its extension (case-insensitive).
    pub fn of(path: &str) -> Option<Format> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, ext) = name.rsplit_once('.')?;
        match ext.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(Format::Markdown),
            "txt" => Some(Format::Text),
            "html" | "htm" => Some(Format::Html),
            _ => None,
        }
    }
}

/// Parses `text` as the format of `path`; `None` for an unsupported extension.
pub fn parse(path: &str, text: &str) -> Option<Parsed> {
    let mut parsed = match Format::of(path)? {
        Format::Markdown => markdown(text),
        Format::Text => plain(text),
        Format::Html => crate::html::parse(text),
    }
    .finish();
    if parsed.title.trim().is_empty() {
        parsed.title = title_from_path(path);
    }
    Some(parsed)
}

/// "guides/rate-limits_v2.md" -> "rate limits v2".
pub fn title_from_path(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    stem.replace(['-', '_'], " ")
}

/// Collects sections while a parser walks a document.
#[derive(Default)]
pub(crate) struct Builder {
    pub(crate) title: String,
    first_heading: String,
    /// (level, text) of the open headings.
    stack: Vec<(u8, String)>,
    text: String,
    sections: Vec<Section>,
}

impl Builder {
    /// Starts a new section under a heading of `level` (1 = top).
    pub(crate) fn heading(&mut self, level: u8, heading: &str) {
        let heading = collapse_spaces(heading);
        if heading.is_empty() {
            return;
        }
        self.flush();
        if self.first_heading.is_empty() {
            self.first_heading = heading.clone();
        }
        if level == 1 && self.title.is_empty() {
            self.title = heading.clone();
        }
        while self.stack.last().is_some_and(|(l, _)| *l >= level) {
            self.stack.pop();
        }
        self.stack.push((level, heading));
    }

    /// Appends body text.
    pub(crate) fn push(&mut self, s: &str) {
        self.text.push_str(s);
    }

    /// Appends HTML-style inline text: whitespace runs become one space and
    /// no space starts a line.
    pub(crate) fn push_inline(&mut self, s: &str) {
        for (i, word) in s.split(|c: char| c.is_whitespace()).enumerate() {
            let at_line_start = self.text.is_empty() || self.text.ends_with('\n');
            if i > 0 && !at_line_start && !self.text.ends_with(' ') {
                self.text.push(' ');
            }
            self.text.push_str(word);
        }
    }

    /// Ends the current paragraph or block.
    pub(crate) fn block_break(&mut self) {
        let trimmed = self.text.trim_end_matches([' ', '\t']).len();
        self.text.truncate(trimmed);
        if !self.text.is_empty() && !self.text.ends_with("\n\n") {
            self.text.push_str(if self.text.ends_with('\n') { "\n" } else { "\n\n" });
        }
    }

    /// Ends a line inside a block.
    pub(crate) fn line_break(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
    }

    fn flush(&mut self) {
        let text = self.text.trim();
        if !text.is_empty() {
            let heading = self.stack.iter().map(|(_, h)| h.as_str()).collect::<Vec<_>>().join(" › ");
            self.sections.push(Section { heading, text: text.to_owned() });
        }
        self.text.clear();
    }

    pub(crate) fn finish(mut self) -> Parsed {
        self.flush();
        let title = if self.title.is_empty() { self.first_heading } else { self.title };
        Parsed { title, sections: self.sections }
    }
}

/// Runs of whitespace become one space; trimmed.
pub(crate) fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn level_of(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

fn markdown(text: &str) -> Builder {
    let opts = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS
        | Options::ENABLE_PLUSES_DELIMITED_METADATA_BLOCKS
        | Options::ENABLE_FOOTNOTES;
    let mut b = Builder::default();
    let mut heading: Option<(u8, String)> = None;
    let mut in_metadata = false;
    for event in Parser::new_ext(text, opts) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => heading = Some((level_of(level), String::new())),
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, h)) = heading.take() {
                    b.heading(level, &h);
                }
            }
            Event::Start(Tag::MetadataBlock(_)) => in_metadata = true,
            Event::End(TagEnd::MetadataBlock(_)) => in_metadata = false,
            Event::Text(t) if in_metadata => {
                for line in t.lines() {
                    let key = line.split_once([':', '=']).map(|(k, v)| (k.trim(), v.trim().trim_matches(['"', '\''])));
                    if let Some(("title", v)) = key
                        && b.title.is_empty()
                    {
                        b.title = v.to_owned();
                    }
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => match &mut heading {
                Some((_, h)) => h.push_str(&t),
                None => b.push(&t),
            },
            Event::SoftBreak => match &mut heading {
                Some((_, h)) => h.push(' '),
                None => b.push(" "),
            },
            Event::HardBreak => b.line_break(),
            Event::Start(Tag::CodeBlock(_) | Tag::Table(_) | Tag::List(_) | Tag::BlockQuote(_)) => b.block_break(),
            Event::Start(Tag::Item) => b.line_break(),
            Event::End(TagEnd::TableCell) => b.push(" | "),
            Event::End(TagEnd::TableRow | TagEnd::TableHead | TagEnd::Item) => b.line_break(),
            Event::End(
                TagEnd::Paragraph | TagEnd::CodeBlock | TagEnd::Table | TagEnd::List(_) | TagEnd::BlockQuote(_) | TagEnd::HtmlBlock,
            ) => b.block_break(),
            _ => {}
        }
    }
    b
}

/// Is `line` an underline for a heading of `title_chars` characters?
fn underline_char(line: &str, title_chars: usize) -> Option<char> {
    let line = line.trim_end();
    let c = line.chars().next()?;
    if !"=-*~^#+".contains(c) || !line.chars().all(|x| x == c) {
        return None;
    }
    let n = line.chars().count();
    (n >= 3 && n + 2 >= title_chars.min(60)).then_some(c)
}

fn plain(text: &str) -> Builder {
    let mut b = Builder::default();
    let mut levels: Vec<char> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let title = line.trim();
        let is_heading_text = !title.is_empty() && !line.starts_with([' ', '\t']) && title.chars().count() <= 120;
        if is_heading_text && let Some(c) = lines.get(i + 1).and_then(|u| underline_char(u, title.chars().count())) {
            let level = match levels.iter().position(|x| *x == c) {
                Some(p) => p,
                None => {
                    levels.push(c);
                    levels.len() - 1
                }
            };
            b.heading(u8::try_from(level + 1).unwrap_or(u8::MAX), title);
            i += 2;
            continue;
        }
        if title.is_empty() {
            b.block_break();
        } else {
            b.push(line.trim_end());
            b.push("\n");
        }
        i += 1;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(Format::of("a/b/C.MD"), Some(Format::Markdown));
        assert_eq!(Format::of("x.markdown"), Some(Format::Markdown));
        assert_eq!(Format::of("x.htm"), Some(Format::Html));
        assert_eq!(Format::of("notes.txt"), Some(Format::Text));
        assert_eq!(Format::of("image.png"), None);
        assert_eq!(Format::of("Makefile"), None);
        assert!(parse("x.pdf", "text").is_none());
    }

    #[test]
    fn markdown_sections_follow_headings() {
        let md = "---\ntitle: \"Front title\"\n---\n# Guide\n\nIntro text with `code`.\n\n## Install\n\nRun **cargo** install.\n\n\
                  ```\nlet x = 1;\n```\n\n### Linux\n\n- apt\n- dnf\n\n## Empty\n\n## Use\nSetext\n----\n\nLast.";
        let p = parse("g.md", md).expect("markdown");
        assert_eq!(p.title, "Front title");
        let heads: Vec<_> = p.sections.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(heads, ["Guide", "Guide › Install", "Guide › Install › Linux", "Guide › Setext"]);
        assert_eq!(p.sections[0].text, "Intro text with code.");
        assert_eq!(p.sections[1].text, "Run cargo install.\n\nlet x = 1;");
        assert_eq!(p.sections[2].text, "apt\ndnf");
        assert_eq!(p.sections[3].text, "Last.");
    }

    #[test]
    fn markdown_title_falls_back_to_first_heading_then_file_name() {
        assert_eq!(parse("a.md", "## Sub\n\ntext").expect("md").title, "Sub");
        let p = parse("dir/rate-limits_v2.md", "just text").expect("md");
        assert_eq!(p.title, "rate limits v2");
        assert_eq!(p.sections, [Section { heading: String::new(), text: "just text".into() }]);
    }

    #[test]
    fn text_underlines_make_headings_in_order_of_appearance() {
        let txt = "Function definitions\n********************\n\nA function definition\ndefines a function.\n\n\
                   Decorators\n==========\n\nA decorator wraps.\n\n   indented\n   ----------\n\nNot a heading.";
        let p = parse("f.txt", txt).expect("txt");
        assert_eq!(p.title, "Function definitions");
        assert_eq!(p.sections.len(), 2);
        assert_eq!(p.sections[0].heading, "Function definitions");
        assert_eq!(p.sections[0].text, "A function definition\ndefines a function.");
        assert_eq!(p.sections[1].heading, "Function definitions › Decorators");
        assert!(p.sections[1].text.contains("indented") && p.sections[1].text.contains("Not a heading."));
    }

    #[test]
    fn short_underline_is_not_a_heading() {
        let p = parse("x.txt", "A long line of ordinary prose here\n---\nmore").expect("txt");
        assert_eq!(p.sections.len(), 1);
        assert_eq!(p.sections[0].heading, "");
    }
}
