//! The text analyzer shared by indexing and querying: jieba word segmentation for
//! Chinese (search mode, so compounds also yield their parts), words for Latin
//! script, lower-cased and English-stemmed.

use std::sync::OnceLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// Name under which the analyzer is registered in the tantivy index.
pub const ANALYZER: &str = "dossier_zh_en";

fn jieba() -> &'static Jieba {
    static JIEBA: OnceLock<Jieba> = OnceLock::new();
    JIEBA.get_or_init(Jieba::new)
}

/// Builds the analyzer.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(MixedTokenizer)
        .filter(RemoveLongFilter::limit(48))
        .filter(LowerCaser)
        // English function words carry no evidence and slow every query down.
        .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stop words"))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Runs the analyzer and returns the terms, for building queries.
pub fn terms(text: &str) -> Vec<String> {
    thread_local! {
        // Building the analyzer (stop-word set, stemmer) costs as much as analysing a
        // short query; each thread keeps one.
        static ANALYZER_FOR_QUERIES: std::cell::RefCell<TextAnalyzer> =
            std::cell::RefCell::new(analyzer());
    }
    ANALYZER_FOR_QUERIES.with_borrow_mut(|a| {
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push(t.text.clone());
        }
        out
    })
}

#[derive(Clone)]
struct MixedTokenizer;

struct MixedStream {
    tokens: Vec<Token>,
    at: usize,
}

impl Tokenizer for MixedTokenizer {
    type TokenStream<'a> = MixedStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> MixedStream {
        let mut tokens = Vec::new();
        // jieba reports character offsets; tantivy wants byte offsets.
        let byte_at: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
        for (i, w) in jieba()
            .tokenize(text, jieba_rs::TokenizeMode::Search, false)
            .into_iter()
            .filter(|w| w.word.chars().any(char::is_alphanumeric))
            .enumerate()
        {
            let start = byte_at.get(w.start).copied().unwrap_or(text.len());
            tokens.push(Token {
                offset_from: start,
                offset_to: start + w.word.len(),
                position: i,
                text: w.word.to_string(),
                position_length: 1,
            });
        }
        MixedStream { tokens, at: 0 }
    }
}

impl TokenStream for MixedStream {
    fn advance(&mut self) -> bool {
        self.at += 1;
        self.at <= self.tokens.len()
    }
    fn token(&self) -> &Token {
        &self.tokens[self.at - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.at - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chinese_is_segmented_and_english_stemmed() {
        let t = terms("耳机无理由退货的签收期限 Payments failing");
        assert!(t.contains(&"耳机".to_string()), "{t:?}");
        assert!(t.contains(&"退货".to_string()), "{t:?}");
        assert!(t.contains(&"payment".to_string()), "{t:?}");
        assert!(t.contains(&"fail".to_string()), "{t:?}");
        assert!(!terms("the place of birth").contains(&"the".to_string()));
    }
}
