//! Deterministic extraction from chunk text, Chinese and English (see [`extract`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use dossier_core::text::normalize;
use dossier_core::Chunk;
use regex::Regex;

use crate::link::TitleTable;
use crate::model::{Alias, EntityKind, Extraction, Mention, Provenance, Relation, Source};
use crate::text::{
    ascii_boundary, clauses, cue_after, cue_before, has_han, inside, is_han, is_id_like,
    is_identifier, kebab_kind, kind_of_word, paren_ranges, sentences, strip_quotes, IDENTIFIER,
    KEBAB,
};

/// A name found in a chunk's text.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    start: usize,
    end: usize,
    text: String,
    kind: EntityKind,
    /// A hyphenated word in English prose: kept only if a rule gives it a role.
    weak: bool,
    /// A document's name found by the mention linker, and how surely it names it.
    linked: Option<f32>,
}

impl Found {
    fn new(start: usize, end: usize, text: impl Into<String>, kind: EntityKind) -> Found {
        let text = text.into();
        Found {
            start,
            end,
            text,
            kind,
            weak: false,
            linked: None,
        }
    }

    fn mention(&self) -> Mention {
        Mention::new(self.text.clone(), self.kind.clone())
    }
}

static BOOK_TITLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"《([^《》\n]{1,80})》").expect("title pattern"));
static HAN_TEAM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\p{Han}{2,10}(?:团队|小组)").expect("team pattern"));
static ALIAS_MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?i:又称|也称|亦称|简称|别称|别名|俗称|全称|英文名称?|原名|\balso known as\b|\balso called\b|\ba\.k\.a\.?|\baka\b|\bfull name\b|\bformerly\b|\bshort for\b)\s*[:：]?\s*",
    )
    .expect("alias marker pattern")
});
static ALIAS_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:[，,]\s*)?(?i:又称|也称|亦称|简称|别称|俗称|别名为?|\balso known as\b|\balso called\b|\ba\.k\.a\.|\baka\b)\s*[:：]?\s*",
    )
    .expect("alias verb pattern")
});
static LIST_SEP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\s*(?:[、,，/；;]|和|及|或|\band\b|\bor\b)\s*").expect("list pattern")
});
/// What may stand between two names of one list (`A、B 和客户 C`, `A, B and C`).
static COORDINATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:[\s、,，/&]|和|与|以及|及|或|\band\b|\bor\b|\bthe\b|服务|团队|客户|供应商|产品|service|services|team|teams|customer|customers|supplier|suppliers|product|products)*$",
    )
    .expect("coordination pattern")
});
/// Words that leave a clause without a subject of its own (`It was resolved by`,
/// `本次事故修复动作为`).
static FILLER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:\s|\bit\b|\bthis\b|\bthat\b|\bthe\b|\bthese\b|\bwas\b|\bis\b|\bwere\b|\bare\b|\bhas\b|\bhave\b|\bbeen\b|\bbe\b|\bincident\b|\boutage\b|\bevent\b|\bissue\b|本次|该|此|这次|其|事故|事件|问题|故障)*$",
    )
    .expect("filler pattern")
});

/// Small words inside English names.
const NAME_JOINERS: &[&str] = &[
    "of", "the", "de", "von", "van", "der", "du", "da", "la", "le", "y",
];

/// Characters that start a clause but are not part of the name after them.
const FUNCTION_CHARS: &[char] = &[
    '由', '的', '和', '与', '及', '被', '是', '为', '在', '向', '对', '给', '归', '将', '把',
];

/// Finds names, alias statements and relations in chunks, deterministically, in Chinese
/// and English. Chunks are grouped by document version; alias statements teach the
/// names they introduce to the rest of that same version only (so the text that taught
/// a name is always as visible as the text that uses it).
///
/// Rules, in the order they claim text (an earlier rule's span is never re-read):
/// 1. **Document titles**: `《…》`, and the names of *other* documents written plainly
///    (titles, titles less their qualifier, the documents' own aliases — the mention
///    linker of a [`TitleTable`]); a title that names exactly one document becomes a
///    `mentions_document` edge to that document, else a `Title` mention. A plainly
///    written name's edge is [`Source::Linked`], with how specific the match was.
/// 2. **Identifiers**: capitals, a hyphen, digits (`P-204`, `INC-4821`, `REL-2026-04`).
/// 3. **Teams** written in Chinese: `…团队` / `…小组`.
/// 4. **Hyphenated names** (`payment-gateway`, `pay-gw`): services, or teams by a cue word
///    or an organisational suffix (`-core`, `-infra`, `-ops` …). In English prose, where
///    hyphenated words are common, such a name counts only with a cue word, a digit, code
///    quotes, or a role in a relation or alias statement.
/// 5. **Alias statements**: `X（又称“Y”，全称“Z”）`, `X（Y，又称 A、B）`, `X, also known as Y`,
///    `X (Y)` where Y is an identifier or hyphenated name; their names are then found
///    everywhere in the same document version.
/// 6. **Relation phrases**: `由…供应` / supplied by, `受到…影响` / affected by, `依赖` /
///    depends on, `由…负责` / owned by, `修复动作为` / resolved by, `受影响客户：A、B` /
///    affected customers: (→ `affects`), `命中` / hit. The subject is the nearest name before
///    the phrase in its clause (or a short Chinese noun phrase standing alone before it),
///    else the subject of the sentence's previous relation, else (when nothing but
///    filler precedes the phrase) the sentence's first name or the document's topic (an
///    identifier in its section headings or title).
///
/// A kind is guessed from cue words next to a name (`供应商 S-8`, `risk alert RA-12`,
/// `payments-core 团队`) and from its role in a relation.
pub fn extract(chunks: &[Chunk], titles: &TitleTable) -> Extraction {
    let mut groups: BTreeMap<(&str, &str), Vec<&Chunk>> = BTreeMap::new();
    for c in chunks {
        groups.entry((&c.doc_id, &c.version)).or_default().push(c);
    }
    let mut out = Extraction::default();
    for group in groups.values() {
        out.extend(extract_version(group, titles));
    }
    out
}

impl TitleTable {
    /// Learns the names documents give themselves in their own text — an alias
    /// statement (`X, also known as Y`, `X（简称 Y）`) whose named thing is the
    /// document's title, or its title less the qualifier — as further names of those
    /// documents, for [`extract`] to find in other documents' text. One pass over the
    /// chunks.
    pub fn learn_aliases(&mut self, chunks: &[Chunk]) {
        let none = TitleTable::default();
        for c in chunks {
            let own = TitleTable::own_names(&c.title);
            if own.is_empty() {
                continue;
            }
            for s in alias_statements(&c.text, &find_mentions(c, &none, &[])) {
                if !own.contains(&normalize(&s.canonical.text)) {
                    continue;
                }
                for a in &s.aliases {
                    self.add_alias(&c.tenant, &c.doc_id, &a.text);
                }
            }
        }
    }
}

fn extract_version(chunks: &[&Chunk], titles: &TitleTable) -> Extraction {
    let mut out = Extraction::default();
    // Pass 1: alias statements, which give the lexicon of this version.
    let stmts: Vec<Vec<Stmt>> = chunks
        .iter()
        .map(|c| alias_statements(&c.text, &find_mentions(c, titles, &[])))
        .collect();
    let mut lexicon: BTreeMap<String, EntityKind> = BTreeMap::new();
    for s in stmts.iter().flatten() {
        for f in std::iter::once(&s.canonical).chain(&s.aliases) {
            if f.text.chars().count() >= 2 && !is_identifier(&f.text) {
                lexicon.entry(f.text.clone()).or_insert(f.kind.clone());
            }
        }
    }
    let mut lexicon: Vec<(String, EntityKind)> = lexicon.into_iter().collect();
    lexicon.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));

    for (c, stmts) in chunks.iter().zip(stmts) {
        let prov = |span: Option<(usize, usize)>, source: Source| Provenance {
            tenant: c.tenant.clone(),
            doc_id: c.doc_id.clone(),
            version: c.version.clone(),
            chunk_id: Some(c.chunk_id.clone()),
            span,
            source,
        };
        let found = find_mentions(c, titles, &lexicon);
        let own = Mention::new(c.doc_id.clone(), EntityKind::Document);
        out.mentions
            .push((own.clone(), prov(None, Source::Declared)));

        for s in &stmts {
            let reason = format!("alias statement \"{}\"", &c.text[s.start..s.end]);
            for a in &s.aliases {
                out.aliases.push(Alias {
                    alias: a.mention(),
                    canonical: s.canonical.mention(),
                    reason: reason.clone(),
                    provenance: prov(Some((s.start, s.end)), Source::Extracted),
                });
            }
        }

        let (relations, used) = relations(c, &found);
        for (from, rel, to, span) in relations {
            out.relations.push(Relation {
                from,
                relation: rel.to_string(),
                to,
                provenance: prov(Some(span), Source::Extracted),
                evidence: None,
            });
        }
        for (i, f) in found.iter().enumerate() {
            if f.weak && !used.contains(&i) {
                continue;
            }
            out.mentions
                .push((f.mention(), prov(Some((f.start, f.end)), Source::Extracted)));
            if matches!(f.kind, EntityKind::Document | EntityKind::Title) {
                let source = match f.linked {
                    Some(specificity) => Source::Linked { specificity },
                    None => Source::Extracted,
                };
                out.relations.push(Relation {
                    from: own.clone(),
                    relation: "mentions_document".into(),
                    to: f.mention(),
                    provenance: prov(Some((f.start, f.end)), source),
                    evidence: None,
                });
            }
        }
    }
    out
}

/// Every name in a chunk, non-overlapping, sorted by position.
fn find_mentions(c: &Chunk, titles: &TitleTable, lexicon: &[(String, EntityKind)]) -> Vec<Found> {
    let text = c.text.as_str();
    let mut out: Vec<Found> = Vec::new();
    let free = |out: &[Found], a: usize, b: usize| out.iter().all(|f| f.end <= a || b <= f.start);
    let push = |out: &mut Vec<Found>, f: Found| {
        if free(out, f.start, f.end) {
            out.push(f);
        }
    };

    for m in BOOK_TITLE.captures_iter(text) {
        let g = m.get(1).expect("group 1");
        let (text, kind) = match titles.resolve(&c.tenant, g.as_str()) {
            Some(id) if id == c.doc_id => continue,
            Some(id) => (id.to_string(), EntityKind::Document),
            None => (g.as_str().trim().to_string(), EntityKind::Title),
        };
        push(&mut out, Found::new(g.start(), g.end(), text, kind));
    }
    for l in titles.find_plain(&c.tenant, &c.doc_id, text) {
        let mut f = Found::new(l.start, l.end, l.doc_id, EntityKind::Document);
        f.linked = Some(l.specificity);
        push(&mut out, f);
    }
    for m in IDENTIFIER.find_iter(text) {
        if ascii_boundary(text, m.start(), m.end()) {
            let kind = cue_before(text, m.start())
                .or_else(|| cue_after(text, m.end()))
                .unwrap_or(EntityKind::Identifier);
            push(&mut out, Found::new(m.start(), m.end(), m.as_str(), kind));
        }
    }
    for m in HAN_TEAM.find_iter(text) {
        // A run such as `结算链路由风控团队` holds its own clause: the team starts after
        // the last function character.
        let s = m.as_str();
        let s = s.rfind(FUNCTION_CHARS).map_or(s, |i| {
            &s[i + s[i..].chars().next().map_or(0, char::len_utf8)..]
        });
        if s.chars().count() >= 3 {
            let start = m.end() - s.len();
            push(&mut out, Found::new(start, m.end(), s, EntityKind::Team));
        }
    }
    for m in KEBAB.find_iter(text) {
        if !ascii_boundary(text, m.start(), m.end()) {
            continue;
        }
        let after = cue_after(text, m.end());
        let before = cue_before(text, m.start());
        let line = line_of(text, m.start());
        let coded = text[..m.start()].ends_with('`');
        let weak = !(has_han(line)
            || m.as_str().contains(|c: char| c.is_ascii_digit())
            || coded
            || after.is_some()
            || before.is_some());
        let kind = after.or(before).unwrap_or_else(|| kebab_kind(m.as_str()));
        push(
            &mut out,
            Found {
                start: m.start(),
                end: m.end(),
                text: m.as_str().into(),
                kind,
                weak,
                linked: None,
            },
        );
    }
    for (name, kind) in lexicon {
        for (i, _) in text.match_indices(name.as_str()) {
            let end = i + name.len();
            if name.is_ascii() && !ascii_boundary(text, i, end) {
                continue;
            }
            push(&mut out, Found::new(i, end, name.clone(), kind.clone()));
        }
    }
    out.sort_by_key(|f| f.start);
    out
}

fn line_of(text: &str, pos: usize) -> &str {
    let a = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let b = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    &text[a..b]
}

/// An alias statement: its span, the canonical name and the names it gives it.
#[derive(Debug, Clone)]
struct Stmt {
    start: usize,
    end: usize,
    canonical: Found,
    aliases: Vec<Found>,
}

fn alias_statements(text: &str, found: &[Found]) -> Vec<Stmt> {
    let parens = paren_ranges(text);
    let mut out = Vec::new();
    // `X（Y，又称 A、B）`, `X (also known as Y)`, `X (Y)`.
    for &(a, b) in &parens {
        let open = text[a..].chars().next().map_or(1, char::len_utf8);
        let close = text[..b].chars().next_back().map_or(1, char::len_utf8);
        let (ia, ib) = (a + open, b - close);
        let mut marked = Vec::new();
        let mut unmarked = Vec::new();
        let mut acronyms = Vec::new();
        for (pa, pb) in split_parts(text, ia, ib) {
            let pa = pb - text[pa..pb].trim_start().len();
            let part = &text[pa..pb];
            if let Some(m) = ALIAS_MARKER.find(part) {
                marked.extend(names_in(text, pa + m.end(), pb, found));
            } else if let Some(f) = name_at(text, pa, pb, found) {
                if is_id_like(&f.text) {
                    unmarked.push(f);
                } else if is_acronym(&f.text) {
                    acronyms.push(f);
                }
            }
        }
        let head = head_before(text, a, found, &parens);
        // `Inter Press Service (IPS)`: an unmarked acronym must spell its head.
        if let Some(h) = &head {
            marked.extend(acronyms.into_iter().filter(|f| spells(&f.text, &h.text)));
        }
        if marked.is_empty() && unmarked.is_empty() {
            continue;
        }
        if let Some(s) = statement(head, unmarked, marked, b) {
            out.push(s);
        }
    }
    // `X，又称 Y`, `X, also known as Y`.
    for m in ALIAS_VERB.find_iter(text) {
        if inside(&parens, m.start()) {
            continue;
        }
        let end = text[m.end()..]
            .find([
                '，', ',', '。', '；', ';', '\n', '（', '(', '）', ')', '!', '?',
            ])
            .map_or(text.len(), |i| m.end() + i);
        let end = match text[m.end()..end].find(". ") {
            Some(i) => m.end() + i,
            None => end,
        };
        let end = if text[..end].ends_with('.') {
            end - 1
        } else {
            end
        };
        let names = names_in(text, m.end(), end, found);
        let head = head_before(text, m.start(), found, &parens);
        if let Some(s) = statement(head, vec![], names, end) {
            out.push(s);
        }
    }
    out
}

/// Puts a statement together: an identifier-like head is canonical, else the first bare
/// identifier-like name in the brackets, else the head. Everything else is its alias.
fn statement(
    head: Option<Found>,
    unmarked: Vec<Found>,
    marked: Vec<Found>,
    end: usize,
) -> Option<Stmt> {
    let start = [&head, &unmarked.first().cloned(), &marked.first().cloned()]
        .into_iter()
        .flatten()
        .map(|f| f.start)
        .min()?;
    let head_canonical = head.as_ref().is_some_and(|h| is_id_like(&h.text));
    let ci = match (&head, unmarked.is_empty()) {
        (Some(_), _) if head_canonical => 0,
        (h, false) => usize::from(h.is_some()),
        _ => 0,
    };
    let mut names: Vec<Found> = head.into_iter().chain(unmarked).chain(marked).collect();
    let mut canonical = names.remove(ci);
    if canonical.kind.is_generic() {
        if let Some(k) = names.iter().map(|f| &f.kind).find(|k| !k.is_generic()) {
            canonical.kind = k.clone();
        }
    }
    let key = normalize(&canonical.text);
    let mut seen = HashSet::from([key]);
    let aliases: Vec<Found> = names
        .into_iter()
        .filter(|f| seen.insert(normalize(&f.text)))
        .map(|mut f| {
            if f.kind.is_generic() {
                f.kind = canonical.kind.clone();
            }
            f
        })
        .collect();
    (!aliases.is_empty()).then_some(Stmt {
        start,
        end,
        canonical,
        aliases,
    })
}

/// Parts of a bracketed aside, cut at commas and semicolons outside quotes.
fn split_parts(text: &str, a: usize, b: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = a;
    let mut depth = 0i32;
    for (i, ch) in text[a..b].char_indices() {
        match ch {
            '“' | '「' | '『' | '‘' => depth += 1,
            '”' | '」' | '』' | '’' => depth = (depth - 1).max(0),
            '，' | ',' | ';' | '；' if depth == 0 => {
                out.push((from, a + i));
                from = a + i + ch.len_utf8();
            }
            _ => {}
        }
    }
    out.push((from, b));
    out.into_iter()
        .filter(|(x, y)| text[*x..*y].trim() != "")
        .collect()
}

/// The names of a list (`A、B`, `"Y" and Z`), as found mentions where they are ones.
fn names_in(text: &str, a: usize, b: usize, found: &[Found]) -> Vec<Found> {
    let mut out = Vec::new();
    let mut from = a;
    let mut cuts: Vec<(usize, usize)> = LIST_SEP
        .find_iter(&text[a..b])
        .map(|m| (a + m.start(), a + m.end()))
        .collect();
    cuts.push((b, b));
    for (x, y) in cuts {
        if let Some(f) = name_at(text, from, x, found) {
            out.push(f);
        }
        from = y;
    }
    out
}

/// The name written in `text[a..b]` once quotes and spaces are stripped.
fn name_at(text: &str, a: usize, b: usize, found: &[Found]) -> Option<Found> {
    let raw = &text[a..b];
    let s = strip_quotes(raw);
    let s = s.strip_prefix("the ").unwrap_or(s);
    let n = normalize(s).chars().count();
    if n == 0 || s.chars().count() > 40 {
        return None;
    }
    let start = a + raw.find(s)?;
    let end = start + s.len();
    if let Some(f) = found.iter().find(|f| f.start == start && f.end == end) {
        return Some(f.clone());
    }
    let kind = if is_identifier(s) {
        EntityKind::Identifier
    } else if KEBAB.find(s).is_some_and(|m| m.len() == s.len()) {
        kebab_kind(s)
    } else {
        EntityKind::Concept
    };
    Some(Found::new(start, end, s.to_string(), kind))
}

/// Whether an acronym's letters appear in order in `head`, starting with its first.
fn spells(acronym: &str, head: &str) -> bool {
    let lower = |s: &str| -> Vec<char> {
        s.chars()
            .filter(char::is_ascii_alphabetic)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let (a, h) = (lower(acronym), lower(head));
    let mut rest = h.iter();
    a.first().is_some_and(|f| h.first() == Some(f)) && a.iter().all(|l| rest.any(|c| c == l))
}

fn is_acronym(s: &str) -> bool {
    (2..=6).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// The name right before `pos`: a found mention ending there, else a run of Chinese
/// characters, else up to five capitalised English words.
fn head_before(
    text: &str,
    pos: usize,
    found: &[Found],
    parens: &[(usize, usize)],
) -> Option<Found> {
    let pre = text[..pos].trim_end();
    if let Some(f) = found
        .iter()
        .find(|f| f.end == pre.len() && !inside(parens, f.start))
    {
        return Some(f.clone());
    }
    let han: String = pre
        .chars()
        .rev()
        .take_while(|&c| is_han(c))
        .take(12)
        .collect();
    let han: String = han.chars().rev().collect();
    let han = han.trim_start_matches(FUNCTION_CHARS);
    if han.chars().count() >= 2 {
        let start = pre.len() - han.len();
        return Some(Found::new(
            start,
            pre.len(),
            han.to_string(),
            EntityKind::Concept,
        ));
    }
    // Capitalised words, with the small words names are joined by (`Amy of Garmoran`).
    let upper = |w: &str| {
        w.starts_with(|c: char| c.is_ascii_uppercase()) && !w.ends_with([',', '.', ':', ';'])
    };
    let words: Vec<&str> = pre.rsplit(' ').collect();
    let mut take = 0;
    for (i, w) in words.iter().enumerate().take(6) {
        let joins =
            take > 0 && NAME_JOINERS.contains(w) && words.get(i + 1).is_some_and(|x| upper(x));
        if !(upper(w) || joins) {
            break;
        }
        take = i + 1;
    }
    let s: Vec<&str> = words[..take]
        .iter()
        .rev()
        .copied()
        .skip_while(|w| ["The", "A", "An"].contains(w))
        .collect();
    let s = s.join(" ");
    (!s.is_empty() && pre.ends_with(&s)).then(|| {
        Found::new(
            pre.len() - s.len(),
            pre.len(),
            s.to_string(),
            EntityKind::Concept,
        )
    })
}

/// Where the object of a relation phrase is written.
#[derive(Debug, Clone)]
enum Object {
    /// Between the two halves of a circumfix (`由 … 供应`).
    Between(usize, usize),
    /// After the phrase, a list of names; `header` lists run to the sentence end.
    After { header: bool },
}

#[derive(Debug, Clone)]
struct Trigger {
    start: usize,
    end: usize,
    relation: &'static str,
    object: Object,
    /// The kind the role gives an object with no kind of its own.
    role: Option<EntityKind>,
}

/// A phrase, its relation, the kind its role gives an object, and whether its object list
/// may run past commas to the sentence end (a `受影响客户：A, B` header list).
type PrefixRule = (Regex, &'static str, Option<EntityKind>, bool);

static PREFIX_RULES: LazyLock<Vec<PrefixRule>> = LazyLock::new(|| {
    let r = |p: &str| Regex::new(p).expect("relation pattern");
    vec![
        (r(r"依赖于?"), "depends_on", None, false),
        (
            r(r"修复(?:动作|措施|方案|方式)?(?:为|是)"),
            "resolved_by",
            Some(EntityKind::Change),
            false,
        ),
        (r(r"命中了?"), "hit", Some(EntityKind::Alert), false),
        (
            r(r"受影响的?(客户|用户|商户|服务|系统|订单|产品)?\s*[:：为是]"),
            "affects",
            None,
            true,
        ),
        (
            r(r"(?i)\b(?:supplied by|sourced from)\b"),
            "supplied_by",
            Some(EntityKind::Supplier),
            false,
        ),
        (
            r(r"(?i)\b(?:affected|impacted) by\b"),
            "affected_by",
            None,
            false,
        ),
        (
            r(r"(?i)\b(?:depends on|relies on)\b"),
            "depends_on",
            None,
            false,
        ),
        (
            r(r"(?i)\b(?:owned|maintained) by\b"),
            "owned_by",
            Some(EntityKind::Team),
            false,
        ),
        (
            r(r"(?i)\b(?:resolved|fixed|remediated) by\b"),
            "resolved_by",
            Some(EntityKind::Change),
            false,
        ),
        (
            r(r"(?i)\b(?:hit|triggered)\b"),
            "hit",
            Some(EntityKind::Alert),
            false,
        ),
        (
            r(r"(?i)\baffected (customers|clients|users|services|orders|products)\s*:"),
            "affects",
            None,
            true,
        ),
    ]
});

/// `由 X 供应` / `由 X 负责`, `受(到) X 影响`: the closing verbs and their relations.
const BY_CLOSERS: &[(&str, &str, Option<EntityKind>)] = &[
    ("供应", "supplied_by", Some(EntityKind::Supplier)),
    ("供货", "supplied_by", Some(EntityKind::Supplier)),
    ("提供", "supplied_by", Some(EntityKind::Supplier)),
    ("负责", "owned_by", Some(EntityKind::Team)),
    ("维护", "owned_by", Some(EntityKind::Team)),
    ("管理", "owned_by", Some(EntityKind::Team)),
    ("运营", "owned_by", Some(EntityKind::Team)),
];

fn triggers(text: &str, a: usize, b: usize) -> Vec<Trigger> {
    let mut out = Vec::new();
    let s = &text[a..b];
    // Circumfixes stay within one clause.
    for (ca, cb) in clauses(text, a, b) {
        let cl = &text[ca..cb];
        for (i, _) in cl.match_indices('由') {
            let prev = cl[..i].chars().next_back();
            let next = cl[i + '由'.len_utf8()..].chars().next();
            if matches!(prev, Some('理' | '自' | '缘' | '经')) || next == Some('于') {
                continue;
            }
            let from = i + '由'.len_utf8();
            let best = BY_CLOSERS
                .iter()
                .filter_map(|(w, rel, role)| {
                    cl[from..]
                        .match_indices(w)
                        .map(|(j, _)| from + j)
                        .find(|&j| j > from && !cl[j + w.len()..].starts_with('商'))
                        .map(|j| (j, w, rel, role))
                })
                .min_by_key(|&(j, ..)| j);
            if let Some((j, w, rel, role)) = best {
                out.push(Trigger {
                    start: ca + i,
                    end: ca + j + w.len(),
                    relation: rel,
                    object: Object::Between(ca + from, ca + j),
                    role: role.clone(),
                });
            }
        }
        for (i, w) in cl.match_indices('受') {
            let from = i + w.len();
            let from = if cl[from..].starts_with('到') {
                from + '到'.len_utf8()
            } else {
                from
            };
            if let Some(j) = cl[from..]
                .find("影响")
                .map(|j| from + j)
                .filter(|&j| j > from)
            {
                out.push(Trigger {
                    start: ca + i,
                    end: ca + j + "影响".len(),
                    relation: "affected_by",
                    object: Object::Between(ca + from, ca + j),
                    role: None,
                });
            }
        }
    }
    for (re, rel, role, header) in PREFIX_RULES.iter() {
        for m in re.captures_iter(s) {
            let all = m.get(0).expect("group 0");
            let role = m
                .get(1)
                .and_then(|g| {
                    let w = g.as_str().to_lowercase();
                    kind_of_word(&w).or_else(|| w.strip_suffix('s').and_then(kind_of_word))
                })
                .or_else(|| role.clone());
            out.push(Trigger {
                start: a + all.start(),
                end: a + all.end(),
                relation: rel,
                object: Object::After { header: *header },
                role,
            });
        }
    }
    out.sort_by_key(|t| t.start);
    out
}

type Extracted = (Mention, &'static str, Mention, (usize, usize));

/// Relations of one chunk, and the indices of the found names they used.
fn relations(c: &Chunk, found: &[Found]) -> (Vec<Extracted>, HashSet<usize>) {
    let text = c.text.as_str();
    let parens = paren_ranges(text);
    let mut out: Vec<Extracted> = Vec::new();
    let mut used = HashSet::new();
    let mut seen = HashSet::new();
    for (sa, sb) in sentences(text) {
        let cls = clauses(text, sa, sb);
        let mut last_subject: Option<Found> = None;
        let mut objects: HashSet<usize> = HashSet::new();
        for t in triggers(text, sa, sb) {
            if inside(&parens, t.start) {
                continue;
            }
            let (ca, _) = cls
                .iter()
                .copied()
                .rfind(|&(x, _)| x <= t.start)
                .unwrap_or((sa, sb));
            let clause_end = cls
                .iter()
                .find(|&&(x, y)| x <= t.start && t.start < y)
                .map_or(sb, |&(_, y)| y);
            let mut objs: Vec<usize> = match t.object {
                Object::Between(x, y) => found
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.start >= x && f.end <= y && !inside(&parens, f.start))
                    .map(|(i, _)| i)
                    .collect(),
                Object::After { header } => {
                    after(text, found, t.end, if header { sb } else { clause_end })
                }
            };
            // "hit" is common English: only an identifier is hit (an alert, a rule).
            if t.relation == "hit" {
                objs.retain(|&i| is_identifier(&found[i].text));
            }
            let mut targets: Vec<Found> = objs.iter().map(|&i| found[i].clone()).collect();
            if targets.is_empty() {
                if let Object::Between(x, y) = t.object {
                    if let Some(f) = han_phrase(text, x, y) {
                        targets.push(f);
                    }
                }
            }
            if targets.is_empty() {
                continue;
            }
            let subject = subject(found, &parens, ca, t.start, &objects)
                .map(|i| {
                    used.insert(i);
                    found[i].clone()
                })
                .or_else(|| han_subject(text, ca, t.start))
                .or_else(|| last_subject.clone())
                .or_else(|| {
                    let before = &text[ca..t.start];
                    FILLER.is_match(before).then(|| {
                        found
                            .iter()
                            .find(|f| {
                                f.start >= sa && f.end <= t.start && !inside(&parens, f.start)
                            })
                            .cloned()
                            .or_else(|| topic(c))
                    })?
                });
            let Some(subject) = subject else { continue };
            for (k, mut o) in targets.into_iter().enumerate() {
                if let Some(&i) = objs.get(k) {
                    used.insert(i);
                    objects.insert(i);
                }
                if let Some(role) = &t.role {
                    if o.kind.is_generic() {
                        o.kind = role.clone();
                    }
                }
                if normalize(&o.text) == normalize(&subject.text) {
                    continue;
                }
                // A topic taken from the headings is not written here: the span starts
                // at the phrase.
                let written = subject.end > subject.start && subject.start >= sa;
                let from = if written {
                    subject.start.min(t.start)
                } else {
                    t.start
                };
                let span = (from, o.end.max(t.end));
                if seen.insert((subject.text.clone(), t.relation, o.text.clone())) {
                    out.push((subject.mention(), t.relation, o.mention(), span));
                }
            }
            last_subject = Some(subject);
        }
    }
    (out, used)
}

/// Names after a phrase up to `to`: the first, and those joined to it by list separators.
fn after(text: &str, found: &[Found], from: usize, to: usize) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for (i, f) in found.iter().enumerate() {
        if f.start < from || f.end > to {
            continue;
        }
        match out.last() {
            None => out.push(i),
            Some(&p) if COORDINATION.is_match(&text[found[p].end..f.start]) => out.push(i),
            Some(_) => break,
        }
    }
    out
}

/// The subject in the clause: the nearest name before the phrase, outside brackets and
/// not the object of an earlier phrase; a strong name before a weak one.
fn subject(
    found: &[Found],
    parens: &[(usize, usize)],
    clause_start: usize,
    pos: usize,
    objects: &HashSet<usize>,
) -> Option<usize> {
    let cands: Vec<usize> = found
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            f.start >= clause_start
                && f.end <= pos
                && !inside(parens, f.start)
                && !objects.contains(i)
        })
        .map(|(i, _)| i)
        .collect();
    cands
        .iter()
        .rev()
        .find(|&&i| !found[i].weak)
        .or(cands.last())
        .copied()
}

/// A clause that is only a short run of Chinese characters before the phrase is its
/// subject (`订单服务依赖 …`).
fn han_subject(text: &str, clause_start: usize, pos: usize) -> Option<Found> {
    let region = text[clause_start..pos].trim_end();
    let end = clause_start + region.len();
    let s = region.trim_start().trim_start_matches(FUNCTION_CHARS);
    let n = s.chars().count();
    ((2..=10).contains(&n) && s.chars().all(is_han))
        .then(|| Found::new(end - s.len(), end, s.to_string(), EntityKind::Concept))
}

/// The object of a circumfix that holds no name: a short Chinese phrase (`由风控组负责`).
fn han_phrase(text: &str, a: usize, b: usize) -> Option<Found> {
    let s = strip_quotes(&text[a..b]);
    let n = s.chars().count();
    ((2..=12).contains(&n) && s.chars().all(is_han)).then(|| {
        let start = a + text[a..b].find(s).unwrap_or(0);
        Found::new(start, start + s.len(), s.to_string(), EntityKind::Concept)
    })
}

/// What a chunk is about when a phrase has no written subject: the first identifier or
/// hyphenated name in its headings (innermost first), then in its document's title.
fn topic(c: &Chunk) -> Option<Found> {
    c.section
        .iter()
        .rev()
        .chain(std::iter::once(&c.title))
        .find_map(|h| {
            let m = IDENTIFIER
                .find_iter(h)
                .chain(KEBAB.find_iter(h))
                .filter(|m| ascii_boundary(h, m.start(), m.end()))
                .min_by_key(|m| m.start())?;
            let kind = cue_before(h, m.start())
                .or_else(|| cue_after(h, m.end()))
                .unwrap_or_else(|| match is_identifier(m.as_str()) {
                    true => EntityKind::Identifier,
                    false => kebab_kind(m.as_str()),
                });
            // The topic is not written in this chunk's text: it spans nothing there.
            Some(Found::new(0, 0, m.as_str().to_string(), kind))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{chunk, version};

    fn run(text: &str) -> Extraction {
        extract(&[chunk("d", "doc", &[], text)], &TitleTable::default())
    }

    fn rels(x: &Extraction) -> Vec<String> {
        let mut v: Vec<String> = x
            .relations
            .iter()
            .filter(|r| r.relation != "mentions_document")
            .map(|r| format!("{} {} {}", r.from.text, r.relation, r.to.text))
            .collect();
        v.sort();
        v
    }

    fn kind_of(x: &Extraction, name: &str) -> Option<EntityKind> {
        x.mentions
            .iter()
            .map(|(m, _)| m)
            .chain(x.relations.iter().flat_map(|r| [&r.from, &r.to]))
            .find(|m| m.text == name)
            .map(|m| m.kind.clone())
    }

    fn aliases(x: &Extraction) -> Vec<String> {
        let mut v: Vec<String> = x
            .aliases
            .iter()
            .map(|a| format!("{} -> {}", a.alias.text, a.canonical.text))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn identifiers_with_cue_kinds() {
        let x = run("工单 TCK-12 关联客户 C-77，变更单 CHG-5 已上线；see release REL-2027-01 and vendor V-3.");
        assert_eq!(kind_of(&x, "C-77"), Some(EntityKind::Customer));
        assert_eq!(kind_of(&x, "CHG-5"), Some(EntityKind::Change));
        assert_eq!(kind_of(&x, "REL-2027-01"), Some(EntityKind::Release));
        assert_eq!(kind_of(&x, "V-3"), Some(EntityKind::Supplier));
        assert_eq!(kind_of(&x, "TCK-12"), Some(EntityKind::Identifier));
        // Dates and header names are not identifiers.
        let x = run("2027-01-05 起在请求头 X-Trace-Id 中携带。");
        assert!(x
            .mentions
            .iter()
            .all(|(m, _)| m.kind == EntityKind::Document));
    }

    #[test]
    fn hyphenated_names_in_both_languages() {
        let x = run("订单服务 order-svc 由 billing-infra 负责。");
        assert_eq!(kind_of(&x, "order-svc"), Some(EntityKind::Service));
        assert_eq!(kind_of(&x, "billing-infra"), Some(EntityKind::Team));
        // English prose: a hyphenated word counts only with a cue or a role.
        let x = run("It is a well-known fact. The search-api service is fast.");
        assert_eq!(kind_of(&x, "well-known"), None);
        assert_eq!(kind_of(&x, "search-api"), Some(EntityKind::Service));
    }

    #[test]
    fn chinese_team_names() {
        let x = run("结算链路由风控团队负责。");
        assert_eq!(rels(&x), ["结算链路 owned_by 风控团队"]);
        assert_eq!(kind_of(&x, "风控团队"), Some(EntityKind::Team));
    }

    #[test]
    fn supplied_by_both_languages() {
        let x = run("P-330 的功放模组由供应商 V-12 供应。");
        assert_eq!(rels(&x), ["P-330 supplied_by V-12"]);
        let x = run("The amplifier of P-330 is supplied by V-12.");
        assert_eq!(rels(&x), ["P-330 supplied_by V-12"]);
        let r = &x.relations[0];
        assert_eq!(r.to.kind, EntityKind::Supplier);
        let (a, b) = r.provenance.span.unwrap();
        assert_eq!(
            &"The amplifier of P-330 is supplied by V-12."[a..b],
            "P-330 is supplied by V-12"
        );
    }

    #[test]
    fn affected_by_both_languages() {
        let x = run("仓储机器人 R-9 受到停电事件 EV-3 影响。");
        assert_eq!(rels(&x), ["R-9 affected_by EV-3"]);
        assert_eq!(x.relations[0].to.kind, EntityKind::Event);
        let x = run("Robot R-9 was affected by outage EV-3.");
        assert_eq!(rels(&x), ["R-9 affected_by EV-3"]);
    }

    #[test]
    fn depends_on_lists_and_carried_subjects() {
        let x = run("checkout-api depends on inventory-svc and pricing-svc.");
        assert_eq!(
            rels(&x),
            [
                "checkout-api depends_on inventory-svc",
                "checkout-api depends_on pricing-svc"
            ]
        );
        let x = run("本地的 search-gw 由 search-core 团队负责，依赖 index-svc 服务和 cache-svc。");
        assert_eq!(
            rels(&x),
            [
                "search-gw depends_on cache-svc",
                "search-gw depends_on index-svc",
                "search-gw owned_by search-core"
            ]
        );
        // A short Chinese subject with no name of its own.
        let x = run("订单中心依赖 stock-svc。");
        assert_eq!(rels(&x), ["订单中心 depends_on stock-svc"]);
    }

    #[test]
    fn owned_by_both_languages() {
        let x = run("billing-api is owned by the payments-core team.");
        assert_eq!(rels(&x), ["billing-api owned_by payments-core"]);
        assert_eq!(x.relations[0].to.kind, EntityKind::Team);
    }

    #[test]
    fn resolved_by_takes_the_topic_when_unsaid() {
        let c = chunk(
            "pm",
            "事故复盘 INC-900：结算延迟",
            &["事故复盘 INC-900：结算延迟", "修复"],
            "## 修复\n修复动作为变更单 CHG-501：回滚配置。",
        );
        let x = extract(&[c], &TitleTable::default());
        assert_eq!(rels(&x), ["INC-900 resolved_by CHG-501"]);
        assert_eq!(x.relations[0].from.kind, EntityKind::Incident);
        let c = chunk(
            "pm",
            "Postmortem INC-901",
            &[],
            "It was resolved by CHG-502.",
        );
        assert_eq!(
            rels(&extract(&[c], &TitleTable::default())),
            ["INC-901 resolved_by CHG-502"]
        );
        // A clause with a subject of its own never takes the topic.
        let c = chunk(
            "pm",
            "Postmortem INC-902",
            &[],
            "The cache layer was fixed by CHG-503.",
        );
        assert!(rels(&extract(&[c], &TitleTable::default())).is_empty());
    }

    #[test]
    fn affects_lists_both_languages() {
        let c = chunk(
            "pm",
            "事故复盘 INC-900",
            &[],
            "受影响客户：C-2001、C-2002 和 C-2003。",
        );
        let x = extract(&[c], &TitleTable::default());
        assert_eq!(
            rels(&x),
            [
                "INC-900 affects C-2001",
                "INC-900 affects C-2002",
                "INC-900 affects C-2003"
            ]
        );
        assert!(x
            .relations
            .iter()
            .all(|r| r.to.kind == EntityKind::Customer));
        let c = chunk(
            "pm",
            "Postmortem INC-901",
            &[],
            "Affected customers: C-3001, C-3002 and C-3003.",
        );
        let x = extract(&[c], &TitleTable::default());
        assert_eq!(rels(&x).len(), 3);
        assert!(x
            .relations
            .iter()
            .all(|r| r.to.kind == EntityKind::Customer));
    }

    #[test]
    fn hit_both_languages() {
        let x = run("客户 C-2002 于 3 月 5 日 10:30 命中风控异常 RA-12（重复下单拦截）。");
        assert_eq!(rels(&x), ["C-2002 hit RA-12"]);
        assert_eq!(x.relations[0].to.kind, EntityKind::Alert);
        let x = run("Customer C-2002 hit risk alert RA-12 on March 5.");
        assert_eq!(rels(&x), ["C-2002 hit RA-12"]);
    }

    #[test]
    fn alias_statements_chinese() {
        let x = run(
            "供应商 V-12（又称“十二号厂”，全称“上海十二号电子有限公司”）受到召回事件 EV-3 影响。",
        );
        assert_eq!(
            aliases(&x),
            ["上海十二号电子有限公司 -> V-12", "十二号厂 -> V-12"]
        );
        // The aside is not the subject; the name before it is.
        assert_eq!(rels(&x), ["V-12 affected_by EV-3"]);
        assert!(x
            .aliases
            .iter()
            .all(|a| a.canonical.kind == EntityKind::Supplier));
        let x = run("订单服务（order-svc，又称 osvc、OSV）出现超时。");
        assert_eq!(
            aliases(&x),
            [
                "OSV -> order-svc",
                "osvc -> order-svc",
                "订单服务 -> order-svc"
            ]
        );
        let x = run("结算系统，又称 settle-core、结算中台。");
        assert_eq!(
            aliases(&x),
            ["settle-core -> 结算系统", "结算中台 -> 结算系统"]
        );
        // A descriptive aside is no alias.
        let x = run("风控异常 RA-12（重复下单拦截）。");
        assert!(x.aliases.is_empty());
    }

    #[test]
    fn alias_statements_english() {
        let x = run("Vendor V-12, also known as Twelve Power, shipped late.");
        assert_eq!(aliases(&x), ["Twelve Power -> V-12"]);
        let x = run("The Checkout Service (checkout-api, a.k.a. co-api) timed out.");
        assert_eq!(
            aliases(&x),
            ["Checkout Service -> checkout-api", "co-api -> checkout-api"]
        );
        let x = run("Payment Gateway (PGW) was slow.");
        assert_eq!(aliases(&x), ["PGW -> Payment Gateway"]);
    }

    #[test]
    fn english_alias_markers_need_whole_words_and_acronyms_must_spell() {
        // `aka` inside a word is no marker.
        assert!(run("Om Prakash was born in Delhi.").aliases.is_empty());
        let x = run("The Recording Industry Association of America (RIAA) certified it.");
        assert_eq!(
            aliases(&x),
            ["RIAA -> Recording Industry Association of America"]
        );
        assert!(run("It went gold in America (RIAA).").aliases.is_empty());
        let x = run("Amy of Garmoran, also known as Amie MacRuari, died young.");
        assert_eq!(aliases(&x), ["Amie MacRuari -> Amy of Garmoran"]);
    }

    #[test]
    fn hit_needs_an_identifier() {
        assert!(rels(&run("The song was a hit single for the well-known band.")).is_empty());
        assert!(rels(&run("客户 C-9 命中了风控规则。")).is_empty());
    }

    #[test]
    fn lexicon_names_are_found_across_the_version() {
        let text = "订单服务（order-svc，又称 osvc）出现超时；订单服务依赖 stock-svc。";
        let x = run(text);
        assert_eq!(rels(&x), ["订单服务 depends_on stock-svc"]);
        assert!(x.mentions.iter().any(|(m, _)| m.text == "osvc"));
    }

    #[test]
    fn titles_resolve_to_documents() {
        let titles = TitleTable::new(&[
            version("rules", "退款规则"),
            version("guide", "Refund Handling Guide"),
        ]);
        let c = chunk(
            "d",
            "doc",
            &[],
            "按《退款规则》处理，另见 Refund Handling Guide，或《不存在的文件》。",
        );
        let x = extract(&[c], &titles);
        let docs: Vec<String> = x
            .relations
            .iter()
            .filter(|r| r.relation == "mentions_document")
            .map(|r| format!("{:?}:{}", r.to.kind, r.to.text))
            .collect();
        assert_eq!(
            docs,
            ["Document:rules", "Document:guide", "Title:不存在的文件"]
        );
        assert_eq!(titles.resolve("t", "退款规则"), Some("rules"));
        assert_eq!(titles.resolve("other", "退款规则"), None);
    }
}
