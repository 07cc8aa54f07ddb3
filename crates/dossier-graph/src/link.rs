//! Mention linking: finding the names of a tenant's documents in its passages, in Chinese
//! and English, without a model (see [`TitleTable`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use dossier_core::text::{base_title, normalize};
use dossier_core::DocumentVersion;

/// A plain-text name must be at least this long (normalised characters), so that short
/// common words are not taken for documents.
const MIN_PLAIN_NAME_CHARS: usize = 4;
/// Names longer than this (in tokens) are not looked for in text.
const MAX_NAME_TOKENS: usize = 24;

/// How a name denotes a document, most specific first. The order decides between
/// candidates of one name when the passage's words do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum NameKind {
    /// The whole title.
    Title,
    /// The title less its qualifier: `Henry Worrall` of `Henry Worrall (artist)`,
    /// `McRae` of `McRae, Arkansas`, `苹果` of `苹果（公司）`.
    Base,
    /// A name the document's own text gives itself (`X, also known as Y`, `X（简称 Y）`).
    Alias,
}

impl NameKind {
    /// How much a match of this kind says on its own (see [`Link::specificity`]).
    fn weight(self) -> f32 {
        match self {
            NameKind::Title => 1.0,
            NameKind::Base | NameKind::Alias => 0.75,
        }
    }
}

/// One document a name may denote.
#[derive(Debug, Clone)]
struct Candidate {
    doc_id: String,
    kind: NameKind,
    /// Normalised words that, found in the passage, point to this candidate: the
    /// qualifier of a base name (`artist`, `arkansas`, `公司`).
    context: Vec<String>,
    /// A one-word base name (`McRae`) is too common a word to link on its own: it links
    /// only where the passage also holds a word of its qualifier.
    needs_context: bool,
}

#[derive(Debug, Clone, Default)]
struct Titles {
    /// Whole normalised titles, and titles without qualifiers or version markers, for
    /// resolving a quoted `《title》`.
    exact: HashMap<String, BTreeSet<String>>,
    base: HashMap<String, BTreeSet<String>>,
    /// Every name looked for in plain text, normalised.
    names: HashMap<String, Vec<Candidate>>,
    first_tokens: HashSet<String>,
    max_tokens: usize,
}

impl Titles {
    fn add_name(&mut self, name: &str, doc_id: &str, kind: NameKind, context: Vec<String>) {
        let toks = tokens(name);
        let key: String = toks.iter().map(|&(a, b)| normalize(&name[a..b])).collect();
        if key.chars().count() < MIN_PLAIN_NAME_CHARS || toks.len() > MAX_NAME_TOKENS {
            return;
        }
        let needs_context =
            kind == NameKind::Base && toks.len() == 1 && name.is_ascii() && !context.is_empty();
        let cands = self.names.entry(key).or_default();
        match cands.iter_mut().find(|c| c.doc_id == doc_id) {
            // Another version of the same document, or the same name twice: keep the
            // most specific kind.
            Some(c) if kind < c.kind => {
                c.kind = kind;
                c.context = context;
                c.needs_context = needs_context;
            }
            Some(_) => {}
            None => cands.push(Candidate {
                doc_id: doc_id.to_string(),
                kind,
                context,
                needs_context,
            }),
        }
        if let Some(&(a, b)) = toks.first() {
            self.first_tokens.insert(normalize(&name[a..b]));
        }
        self.max_tokens = self.max_tokens.max(toks.len());
    }
}

/// A document's name found in a passage: `text[start..end]` names `doc_id`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Link {
    pub start: usize,
    pub end: usize,
    pub doc_id: String,
    /// How surely the words name that document, in (0, 1]: 1 for a whole title that
    /// only one document has; 0.75 for a title without its qualifier or a document's own
    /// alias; halved when the passage's words had to choose between several documents
    /// of that name.
    pub specificity: f32,
}

/// Titles (and the other names) of each tenant's documents, for resolving `《title》` and
/// for finding names written plainly in other documents' text (hyperlink-like edges, as
/// in multi-hop corpora). Built in one pass over the versions (and, with
/// [`TitleTable::learn_aliases`], one over the chunks); matching is a scan of a passage's
/// tokens against a first-token set and a hash of names, linear in the text.
#[derive(Debug, Clone, Default)]
pub struct TitleTable {
    tenants: HashMap<String, Titles>,
}

impl TitleTable {
    pub fn new(versions: &[DocumentVersion]) -> TitleTable {
        let mut t = TitleTable::default();
        for v in versions {
            let e = t.tenants.entry(v.tenant.clone()).or_default();
            let n = normalize(&v.title);
            if n.is_empty() {
                continue;
            }
            e.exact.entry(n).or_default().insert(v.doc_id.clone());
            e.base
                .entry(base_title(&v.title))
                .or_default()
                .insert(v.doc_id.clone());
            e.add_name(&v.title, &v.doc_id, NameKind::Title, vec![]);
            if let Some((base, qualifier)) = split_qualifier(&v.title) {
                e.add_name(base, &v.doc_id, NameKind::Base, context_words(qualifier));
            }
        }
        t
    }

    /// Adds `alias` as a name of `doc_id`, which the document's own text gives itself
    /// (see `TitleTable::learn_aliases`).
    pub(crate) fn add_alias(&mut self, tenant: &str, doc_id: &str, alias: &str) {
        if let Some(t) = self.tenants.get_mut(tenant) {
            t.add_name(alias, doc_id, NameKind::Alias, vec![]);
        }
    }

    /// The normalised names a document's title gives it: the whole title, and the
    /// title less its qualifier.
    pub(crate) fn own_names(title: &str) -> Vec<String> {
        let mut out = vec![normalize(title)];
        if let Some((base, _)) = split_qualifier(title) {
            out.push(normalize(base));
        }
        out.retain(|n| !n.is_empty());
        out
    }

    /// The one document of `tenant` with this title (exact after normalisation, else the
    /// same base title); `None` when no document or several have it.
    pub fn resolve(&self, tenant: &str, title: &str) -> Option<&str> {
        let t = self.tenants.get(tenant)?;
        let ids = match t.exact.get(&normalize(title)) {
            Some(ids) => ids,
            None => t.base.get(&base_title(title))?,
        };
        (ids.len() == 1).then(|| ids.iter().next().map(String::as_str))?
    }

    /// Plain-text names of documents other than `own_doc` in `text`, longest match
    /// first, never crossing a line or a Chinese sentence end. A name several documents
    /// share goes to the one whose qualifier words the text holds, else to the one whose
    /// whole title it is; else it is left unlinked.
    pub(crate) fn find_plain(&self, tenant: &str, own_doc: &str, text: &str) -> Vec<Link> {
        let Some(t) = self.tenants.get(tenant) else {
            return vec![];
        };
        let toks = tokens(text);
        // Normalised tokens, concatenated, are the normalised text they span.
        let norm: Vec<String> = toks.iter().map(|&(a, b)| normalize(&text[a..b])).collect();
        let mut words: Option<Words> = None;
        let mut out = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            if !t.first_tokens.contains(&norm[i]) {
                i += 1;
                continue;
            }
            // A name written in English starts with a capital (or is not ASCII at all).
            let proper = text[toks[i].0..].starts_with(|c: char| !c.is_ascii_lowercase());
            let mut key = String::new();
            let mut hit = None;
            for j in i..(i + t.max_tokens).min(toks.len()) {
                if j > i && text[toks[j - 1].1..toks[j].0].contains(['\n', '。', '；']) {
                    break;
                }
                key.push_str(&norm[j]);
                let Some(cands) = t.names.get(&key) else {
                    continue;
                };
                if !proper {
                    continue;
                }
                let words = words.get_or_insert_with(|| Words::of(&norm));
                if let Some((doc, specificity)) = choose(cands, own_doc, words) {
                    hit = Some((j, doc, specificity));
                }
            }
            match hit {
                Some((j, doc_id, specificity)) => {
                    // A title's closing bracket is part of the name its opening one began.
                    let (start, mut end) = (toks[i].0, toks[j].1);
                    if let Some(c) = text[end..]
                        .chars()
                        .next()
                        .filter(|c| [')', '）', ']'].contains(c))
                    {
                        if text[start..end].contains(['(', '（', '[']) {
                            end += c.len_utf8();
                        }
                    }
                    out.push(Link {
                        start,
                        end,
                        doc_id,
                        specificity,
                    });
                    i = j + 1;
                }
                None => i += 1,
            }
        }
        out
    }
}

/// A passage's normalised words, for telling candidates apart.
struct Words<'a> {
    /// ASCII words.
    set: HashSet<&'a str>,
    /// The whole normalised text, for Chinese qualifiers (no word boundaries).
    joined: String,
}

impl<'a> Words<'a> {
    fn of(norm: &'a [String]) -> Words<'a> {
        Words {
            set: norm.iter().map(String::as_str).collect(),
            joined: norm.concat(),
        }
    }

    fn holds(&self, w: &str) -> bool {
        match w.is_ascii() {
            true => self.set.contains(w),
            false => self.joined.contains(w),
        }
    }
}

/// The words of a qualifier that can point to it: ASCII words of 3 letters or more, and
/// runs of 2 or more other letters (Chinese).
fn context_words(qualifier: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut han = String::new();
    for (a, b) in tokens(qualifier) {
        let w = normalize(&qualifier[a..b]);
        if w.is_ascii() {
            if han.chars().count() >= 2 {
                out.push(std::mem::take(&mut han));
            }
            han.clear();
            if w.len() >= 3 && !w.bytes().all(|c| c.is_ascii_digit()) {
                out.push(w);
            }
        } else {
            han.push_str(&w);
        }
    }
    if han.chars().count() >= 2 {
        out.push(han);
    }
    out
}

/// The document a name found in a passage denotes, with the match's specificity.
fn choose(cands: &[Candidate], own_doc: &str, words: &Words) -> Option<(String, f32)> {
    // In a document's own text, its own name means itself — not a namesake.
    if cands.iter().any(|c| c.doc_id == own_doc) {
        return None;
    }
    let support = |c: &Candidate| c.context.iter().filter(|w| words.holds(w)).count();
    let cands: Vec<&Candidate> = cands
        .iter()
        .filter(|c| !c.needs_context || support(c) > 0)
        .collect();
    match cands.as_slice() {
        [] => return None,
        [one] => return Some((one.doc_id.clone(), one.kind.weight())),
        _ => {}
    }
    // Several documents have this name: the passage's words choose, if they can.
    let best = cands.iter().map(|c| support(c)).max().unwrap_or(0);
    let chosen: Vec<&&Candidate> = if best > 0 {
        cands.iter().filter(|c| support(c) == best).collect()
    } else {
        // No qualifier in sight: the name means the document whose whole title it is.
        cands.iter().filter(|c| c.kind == NameKind::Title).collect()
    };
    match chosen.as_slice() {
        [one] => Some((one.doc_id.clone(), one.kind.weight() / 2.0)),
        _ => None,
    }
}

/// A title less its qualifier (`Henry Worrall` of `Henry Worrall (artist)`), or the
/// whole title when it has none.
pub(crate) fn split_title(title: &str) -> &str {
    split_qualifier(title).map_or(title.trim(), |(base, _)| base)
}

/// A title's name and qualifier: `("Henry Worrall", "artist")` of `Henry Worrall
/// (artist)`, `("McRae", "Arkansas")` of `McRae, Arkansas`, `("苹果", "公司")` of
/// `苹果（公司）`; `None` when the title has no qualifier.
fn split_qualifier(title: &str) -> Option<(&str, &str)> {
    let t = title.trim();
    for (open, close) in [('(', ')'), ('（', '）'), ('[', ']')] {
        if let Some(body) = t.strip_suffix(close) {
            if let Some(at) = body.rfind(open) {
                let base = body[..at].trim_end();
                if !base.is_empty() {
                    return Some((base, &body[at + open.len_utf8()..]));
                }
            }
        }
    }
    // `Place, Region`: one comma, a short capitalised qualifier after it.
    let (base, qualifier) = t.split_once(", ")?;
    let q = qualifier.trim();
    (!base.is_empty()
        && !q.contains(',')
        && q.starts_with(|c: char| c.is_uppercase())
        && q.split_whitespace().count() <= 4)
        .then_some((base, q))
}

/// Word tokens for name matching: ASCII alphanumeric runs, and every other letter or
/// digit (a Chinese character) on its own.
fn tokens(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut run = None;
    for (i, c) in text.char_indices() {
        if c.is_ascii_alphanumeric() {
            run.get_or_insert(i);
            continue;
        }
        if let Some(s) = run.take() {
            out.push((s, i));
        }
        if c.is_alphanumeric() {
            out.push((i, i + c.len_utf8()));
        }
    }
    if let Some(s) = run {
        out.push((s, text.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{chunk, version};

    fn table(titles: &[(&str, &str)]) -> TitleTable {
        let versions: Vec<_> = titles.iter().map(|(id, t)| version(id, t)).collect();
        TitleTable::new(&versions)
    }

    /// `(linked text, document, specificity)` of each link in `text`, read by `own`.
    fn links(t: &TitleTable, own: &str, text: &str) -> Vec<(String, String, f32)> {
        t.find_plain("t", own, text)
            .into_iter()
            .map(|l| (text[l.start..l.end].to_string(), l.doc_id, l.specificity))
            .collect()
    }

    fn link(text: &str, doc: &str, specificity: f32) -> (String, String, f32) {
        (text.into(), doc.into(), specificity)
    }

    #[test]
    fn a_title_without_its_qualifier_links_less_surely() {
        let t = table(&[
            ("hw", "Henry Worrall (artist)"),
            ("ks", "Kansas Pacific Railway"),
        ]);
        assert_eq!(
            links(
                &t,
                "x",
                "A sketch by Henry Worrall shows the Kansas Pacific Railway."
            ),
            [
                link("Henry Worrall", "hw", 0.75),
                link("Kansas Pacific Railway", "ks", 1.0)
            ]
        );
        // The whole title is still the longest match.
        assert_eq!(
            links(&t, "x", "See Henry Worrall (artist) for more."),
            [link("Henry Worrall (artist)", "hw", 1.0)]
        );
        // A document is never linked to itself, and lower-case words are not names.
        assert!(links(&t, "hw", "Henry Worrall was born in Liverpool.").is_empty());
        assert!(links(&t, "x", "the kansas pacific railway").is_empty());
    }

    #[test]
    fn the_passage_words_choose_between_documents_of_one_name() {
        let t = table(&[
            ("arch", "John Marsh (architect)"),
            ("foot", "John Marsh (footballer)"),
            ("paris", "Paris Gardens"),
            ("film", "Paris Gardens (film)"),
        ]);
        assert_eq!(
            links(&t, "x", "The bridge was drawn by the architect John Marsh."),
            [link("John Marsh", "arch", 0.375)]
        );
        assert_eq!(
            links(&t, "x", "John Marsh, a footballer, scored twice."),
            [link("John Marsh", "foot", 0.375)]
        );
        // Nothing tells them apart: no link rather than a guess.
        assert!(links(&t, "x", "John Marsh was born in 1901.").is_empty());
        // On the architect's own page, the name is the architect's, not the footballer's.
        assert!(links(
            &t,
            "arch",
            "John Marsh, a footballer's son, was born in 1901."
        )
        .is_empty());
        // A whole title is what the name means unless a qualifier says otherwise.
        assert_eq!(
            links(&t, "x", "They met at Paris Gardens."),
            [link("Paris Gardens", "paris", 0.5)]
        );
        assert_eq!(
            links(&t, "x", "The film Paris Gardens opened in May."),
            [link("Paris Gardens", "film", 0.375)]
        );
    }

    #[test]
    fn a_one_word_place_name_needs_its_region_in_the_passage() {
        let t = table(&[("mcrae", "McRae, Arkansas")]);
        assert!(links(&t, "x", "McRae scored in the final.").is_empty());
        assert_eq!(
            links(
                &t,
                "x",
                "It was moved to McRae, a town in White County, Arkansas."
            ),
            [link("McRae", "mcrae", 0.75)]
        );
        assert_eq!(split_qualifier("Paris, Texas"), Some(("Paris", "Texas")));
        assert_eq!(
            split_qualifier("George Howard, 11th Earl of Carlisle"),
            None
        );
        assert_eq!(split_title("Henry Worrall (artist)"), "Henry Worrall");
    }

    #[test]
    fn chinese_titles_and_qualifiers() {
        let t = table(&[
            ("wh", "长江大桥（武汉）"),
            ("nj", "长江大桥（南京）"),
            ("gw", "支付网关接入规范"),
        ]);
        assert_eq!(
            links(&t, "x", "南京的长江大桥于1968年通车，见支付网关接入规范。"),
            [
                link("长江大桥", "nj", 0.375),
                link("支付网关接入规范", "gw", 1.0)
            ]
        );
        assert!(links(&t, "x", "长江大桥很长。").is_empty());
    }

    #[test]
    fn a_document_s_own_aliases_become_its_names() {
        let mut t = table(&[
            ("bridge", "Norport Harbour Bridge"),
            ("v12", "上海十二号电子有限公司"),
        ]);
        t.learn_aliases(&[
            chunk(
                "bridge",
                "Norport Harbour Bridge",
                &[],
                "The Norport Harbour Bridge, also known as the Old Span, opened in 1931.",
            ),
            chunk(
                "v12",
                "上海十二号电子有限公司",
                &[],
                "上海十二号电子有限公司（简称十二号电子厂）成立于1999年。",
            ),
            // An alias statement about something else teaches nothing.
            chunk(
                "other",
                "Ferries",
                &[],
                "The Kelso Ferry, also known as the Blue Boat, sank.",
            ),
        ]);
        assert_eq!(
            links(
                &t,
                "x",
                "Trams crossed the Old Span until 1960; 十二号电子厂供货。"
            ),
            [
                link("Old Span", "bridge", 0.75),
                link("十二号电子厂", "v12", 0.75)
            ]
        );
        assert!(links(&t, "x", "The Blue Boat sank.").is_empty());
    }
}
