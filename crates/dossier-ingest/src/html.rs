//! HTML parsing under limits, and the visible-text walk.
//!
//! html5ever checks scopes by walking its stack of open elements, so each tag costs
//! time in proportion to the nesting depth, and a deeply nested file costs depth × tags:
//! quadratic. The parse is therefore fed in slices through a tree sink that records the
//! depth and the number of elements as the tree grows, and stops at the first slice
//! that passes [`IngestOptions::max_html_depth`] or
//! [`IngestOptions::max_html_elements`]; what one slice can add before the check is
//! bounded by its size. Its tokenizer compares each attribute of a tag with the earlier
//! ones, which no sink sees, so a linear pre-scan first bounds attributes per tag and
//! tags per file. [`IngestOptions::max_html_time`] is the backstop for anything else.
//! The walk over the tree is iterative, so no depth can overflow the stack.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Instant;

use ego_tree::iter::Edge;
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, ExpandedName, QualName};
use scraper::{ElementRef, Html, Node};

use crate::{Error, IngestOptions, Result};

/// Input is fed to the parser in slices of this many bytes; the limits are checked
/// after each.
const SLICE: usize = 4096;

type Id = <Html as TreeSink>::Handle;

/// scraper's tree sink, plus the depth of every element and the element count.
struct Sink {
    html: Html,
    depth: HashMap<Id, usize>,
    max_depth: usize,
    elements: usize,
}

impl Sink {
    fn depth_of(&self, id: &Id) -> usize {
        self.depth.get(id).copied().unwrap_or(0)
    }

    fn place(&mut self, child: &NodeOrText<Id>, depth: usize) {
        if let NodeOrText::AppendNode(id) = child {
            self.depth.insert(*id, depth);
            self.max_depth = self.max_depth.max(depth);
        }
    }
}

impl TreeSink for Sink {
    type Output = Html;
    type Handle = Id;

    fn finish(self) -> Html {
        self.html
    }
    fn parse_error(&mut self, msg: Cow<'static, str>) {
        self.html.parse_error(msg)
    }
    fn get_document(&mut self) -> Id {
        self.html.get_document()
    }
    fn elem_name<'a>(&'a self, target: &'a Id) -> ExpandedName<'a> {
        self.html.elem_name(target)
    }
    fn create_element(&mut self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Id {
        self.elements += 1;
        self.html.create_element(name, attrs, flags)
    }
    fn create_comment(&mut self, text: StrTendril) -> Id {
        self.html.create_comment(text)
    }
    fn create_pi(&mut self, target: StrTendril, data: StrTendril) -> Id {
        self.html.create_pi(target, data)
    }
    fn append(&mut self, parent: &Id, child: NodeOrText<Id>) {
        self.place(&child, self.depth_of(parent) + 1);
        self.html.append(parent, child)
    }
    fn append_based_on_parent_node(&mut self, element: &Id, prev: &Id, child: NodeOrText<Id>) {
        let has_parent = self
            .html
            .tree
            .get(*element)
            .is_some_and(|n| n.parent().is_some());
        let depth = match has_parent {
            true => self.depth_of(element),
            false => self.depth_of(prev) + 1,
        };
        self.place(&child, depth);
        self.html.append_based_on_parent_node(element, prev, child)
    }
    fn append_doctype_to_document(
        &mut self,
        name: StrTendril,
        public: StrTendril,
        system: StrTendril,
    ) {
        self.html.append_doctype_to_document(name, public, system)
    }
    fn mark_script_already_started(&mut self, node: &Id) {
        self.html.mark_script_already_started(node)
    }
    fn pop(&mut self, node: &Id) {
        self.html.pop(node)
    }
    fn get_template_contents(&mut self, target: &Id) -> Id {
        let contents = self.html.get_template_contents(target);
        self.depth.insert(contents, self.depth_of(target) + 1);
        contents
    }
    fn same_node(&self, x: &Id, y: &Id) -> bool {
        self.html.same_node(x, y)
    }
    fn set_quirks_mode(&mut self, mode: QuirksMode) {
        self.html.set_quirks_mode(mode)
    }
    fn append_before_sibling(&mut self, sibling: &Id, new_node: NodeOrText<Id>) {
        self.place(&new_node, self.depth_of(sibling));
        self.html.append_before_sibling(sibling, new_node)
    }
    fn add_attrs_if_missing(&mut self, target: &Id, attrs: Vec<Attribute>) {
        self.html.add_attrs_if_missing(target, attrs)
    }
    fn remove_from_parent(&mut self, target: &Id) {
        self.html.remove_from_parent(target)
    }
    fn reparent_children(&mut self, node: &Id, new_parent: &Id) {
        // The moved children's own descendants keep their old depths: the count is a
        // guard against runaway nesting, not an exact measure.
        let depth = self.depth_of(new_parent) + 1;
        if let Some(n) = self.html.tree.get(*node) {
            for c in n.children() {
                self.depth.insert(c.id(), depth);
            }
        }
        self.max_depth = self.max_depth.max(depth);
        self.html.reparent_children(node, new_parent)
    }
    fn is_mathml_annotation_xml_integration_point(&self, handle: &Id) -> bool {
        self.html.is_mathml_annotation_xml_integration_point(handle)
    }
    fn set_current_line(&mut self, line: u64) {
        self.html.set_current_line(line)
    }
}

/// Attributes one tag may have: html5ever compares each new attribute of a tag with
/// all the earlier ones, so a tag costs the square of its attribute count.
const MAX_ATTRIBUTES: usize = 256;

fn refused(msg: String) -> Error {
    Error::invalid(None, format!("{msg}; refused unread"))
}

/// Counts tags and the attributes of each, the way the HTML tokenizer reads them
/// closely enough for a bound: tags, quoted values and comments are followed; the raw
/// text of `<script>` and `<style>` is read as markup, which can only count more.
fn prescan(text: &str, opts: &IngestOptions) -> Result<()> {
    #[derive(Clone, Copy)]
    enum S {
        Data,
        TagName,
        BeforeAttr,
        AttrName,
        AfterAttrName,
        BeforeValue,
        Quoted(u8),
        Unquoted,
        /// A comment whose opening dashes start at this offset.
        Comment(usize),
        Bogus,
    }
    let max_tags = opts.max_html_elements.saturating_mul(2);
    let b = text.as_bytes();
    let ws = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c');
    let (mut s, mut tags, mut attrs) = (S::Data, 0usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let mut attr = false;
        s = match s {
            S::Data if c == b'<' => {
                let rest = &b[i + 1..];
                let alpha = |j: usize| rest.get(j).is_some_and(u8::is_ascii_alphabetic);
                if rest.starts_with(b"!--") {
                    i += 4;
                    s = S::Comment(i - 2);
                    continue;
                } else if alpha(0) || (rest.first() == Some(&b'/') && alpha(1)) {
                    tags += 1;
                    attrs = 0;
                    if tags > max_tags {
                        return Err(refused(format!("HTML has more than {max_tags} tags")));
                    }
                    // The name of an end tag starts after its slash.
                    i += (rest[0] == b'/') as usize;
                    S::TagName
                } else if matches!(rest.first(), Some(b'!' | b'?' | b'/')) {
                    S::Bogus
                } else {
                    S::Data
                }
            }
            S::Data => S::Data,
            S::TagName | S::AttrName | S::Unquoted if ws(c) => match s {
                S::AttrName => S::AfterAttrName,
                _ => S::BeforeAttr,
            },
            S::TagName | S::BeforeAttr | S::AttrName | S::AfterAttrName | S::Unquoted
                if c == b'>' =>
            {
                S::Data
            }
            S::BeforeValue if c == b'>' => S::Data,
            S::TagName | S::AttrName | S::AfterAttrName if c == b'/' => S::BeforeAttr,
            S::TagName | S::Unquoted => s,
            S::BeforeAttr if ws(c) || c == b'/' => s,
            S::BeforeAttr => {
                attr = true;
                S::AttrName
            }
            S::AttrName | S::AfterAttrName if c == b'=' => S::BeforeValue,
            S::AttrName => s,
            S::AfterAttrName if ws(c) => s,
            S::AfterAttrName => {
                attr = true;
                S::AttrName
            }
            S::BeforeValue if ws(c) => s,
            S::BeforeValue if c == b'"' || c == b'\'' => S::Quoted(c),
            S::BeforeValue => S::Unquoted,
            S::Quoted(q) if c == q => S::BeforeAttr,
            S::Quoted(_) => s,
            S::Comment(d) if c == b'>' => {
                let closes =
                    (i >= d + 2 && &b[i - 2..i] == b"--") || (i >= d + 3 && &b[i - 3..i] == b"--!");
                if closes {
                    S::Data
                } else {
                    s
                }
            }
            S::Comment(_) => s,
            S::Bogus if c == b'>' => S::Data,
            S::Bogus => s,
        };
        if attr {
            attrs += 1;
            if attrs > MAX_ATTRIBUTES {
                return Err(refused(format!(
                    "an HTML tag has more than {MAX_ATTRIBUTES} attributes"
                )));
            }
        }
        i += 1;
    }
    Ok(())
}

/// Parses a document, or refuses it once it nests deeper, holds more elements or takes
/// longer than the options allow.
pub(crate) fn parse(text: &str, opts: &IngestOptions) -> Result<Html> {
    prescan(text, opts)?;
    let started = Instant::now();
    let sink = Sink {
        html: Html::new_document(),
        depth: HashMap::new(),
        max_depth: 0,
        elements: 0,
    };
    let mut parser = html5ever::driver::parse_document(sink, Default::default());
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + SLICE).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        parser.process(StrTendril::from_slice(&text[at..end]));
        at = end;
        let sink = &parser.tokenizer.sink.sink;
        // The document node is depth 0 and <html> is 1: depth counts the elements
        // from <html> down.
        if sink.max_depth > opts.max_html_depth {
            let max = opts.max_html_depth;
            return Err(refused(format!("HTML nests elements more than {max} deep")));
        }
        if sink.elements > opts.max_html_elements {
            let max = opts.max_html_elements;
            return Err(refused(format!("HTML has more than {max} elements")));
        }
        // The backstop for whatever the bounds above do not foresee.
        if started.elapsed() >= opts.max_html_time {
            let max = opts.max_html_time;
            return Err(refused(format!("parsing the HTML took more than {max:?}")));
        }
    }
    Ok(parser.finish())
}

pub(crate) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

const SKIPPED: &[&str] = &[
    "head", "script", "style", "noscript", "template", "svg", "iframe", "object", "canvas",
];
const PARAGRAPHS: &[&str] = &[
    "p",
    "pre",
    "blockquote",
    "table",
    "ul",
    "ol",
    "dl",
    "figure",
    "hr",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "form",
    "address",
];
const LINES: &[&str] = &["div", "li", "tr", "dt", "dd", "caption", "figcaption"];

/// Line breaks an element puts before and after itself.
fn breaks(name: &str) -> usize {
    if PARAGRAPHS.contains(&name) {
        2
    } else if LINES.contains(&name) {
        1
    } else {
        0
    }
}

fn heading_level(name: &str) -> Option<usize> {
    name.strip_prefix('h')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=6).contains(n))
}

/// The visible text of `body`; headings become `#` lines so that the chunker sees
/// sections.
pub(crate) fn visible_text(body: ElementRef) -> String {
    let mut out = Extract::default();
    // A subtree being skipped: the node whose close ends the skip.
    let mut skip: Option<Id> = None;
    for edge in body.traverse() {
        match edge {
            Edge::Open(n) if skip.is_none() && n.id() != body.id() => match n.value() {
                Node::Text(t) => out.text(t),
                Node::Element(_) => {
                    if let Some(e) = ElementRef::wrap(n) {
                        if !out.open(e) {
                            skip = Some(n.id());
                        }
                    }
                }
                _ => {}
            },
            Edge::Close(n) if skip == Some(n.id()) => skip = None,
            Edge::Close(n) if skip.is_none() && n.id() != body.id() => {
                if let Node::Element(e) = n.value() {
                    out.close(e.name());
                }
            }
            _ => {}
        }
    }
    out.buf
}

#[derive(Default)]
struct Extract {
    buf: String,
    space: bool,
    /// Open `<pre>` elements.
    pre: usize,
}

impl Extract {
    fn text(&mut self, s: &str) {
        if self.pre > 0 {
            self.buf.push_str(s);
            return;
        }
        for c in s.chars() {
            if c.is_whitespace() {
                self.space = true;
            } else {
                if self.space && !self.buf.is_empty() && !self.buf.ends_with('\n') {
                    self.buf.push(' ');
                }
                self.space = false;
                self.buf.push(c);
            }
        }
    }

    fn newlines(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.space = false;
        if self.buf.is_empty() {
            return;
        }
        // Only the last `n` bytes matter; looking further would make a run of `<br>`s
        // cost its length at every block that follows.
        let tail = &self.buf.as_bytes()[self.buf.len().saturating_sub(n)..];
        let have = tail.iter().rev().take_while(|&&b| b == b'\n').count();
        for _ in have..n {
            self.buf.push('\n');
        }
    }

    /// Opens an element; false when its content is not to be walked (it is hidden, or
    /// a heading, which is written here whole).
    fn open(&mut self, e: ElementRef) -> bool {
        let name = e.value().name();
        if SKIPPED.contains(&name) || e.value().attr("hidden").is_some() {
            return false;
        }
        if let Some(level) = heading_level(name) {
            let label = collapse(&e.text().collect::<String>());
            if !label.is_empty() {
                self.newlines(2);
                self.buf.push_str(&format!("{} {label}", "#".repeat(level)));
                self.newlines(2);
            }
            return false;
        }
        if name == "br" {
            self.buf.push('\n');
            self.space = false;
            return false;
        }
        if matches!(name, "td" | "th") {
            self.space = true;
        }
        self.newlines(breaks(name));
        self.pre += (name == "pre") as usize;
        true
    }

    fn close(&mut self, name: &str) {
        self.pre -= (name == "pre") as usize;
        self.newlines(breaks(name));
    }
}
