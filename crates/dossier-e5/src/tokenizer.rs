//! XLM-RoBERTa's SentencePiece-unigram tokenizer, as the model file describes it.
//!
//! The pipeline is the reference engine's, step for step, because identical ids are the
//! contract (tested against it on thousands of strings, `tests/tokenizer_oracle.rs`):
//!
//! 1. each code point is replaced through the file's normalisation map (NFKC folds,
//!    control characters dropped, tabs and newlines to spaces);
//! 2. runs of spaces collapse to one;
//! 3. a metaspace `▁` is prepended unless the text starts with a space, and every space
//!    becomes `▁`;
//! 4. Viterbi over characters picks the segmentation with the highest total piece score,
//!    an unknown single character costing the lowest score minus 10. Ties keep the
//!    earlier candidate (pieces in order of length, then the unknown fallback).

use std::collections::HashMap;

use crate::format::VocabTables;

const METASPACE: char = '\u{2581}';

/// The unigram tokenizer (owned tables, shareable across threads).
pub struct Tokenizer {
    pieces: PieceTable,
    scores: Vec<f32>,
    normalise: HashMap<u32, Vec<u32>>,
    unk: u32,
    unk_score: f32,
    max_piece_bytes: usize,
    pub(crate) bos: u32,
    pub(crate) eos: u32,
}

/// Piece bytes → id: every piece in one buffer, found through an open-addressing table
/// of ids (250,000 pieces: one allocation instead of one per piece, and a hash cheap
/// enough for the Viterbi inner loop, which looks up every substring it tries).
struct PieceTable {
    bytes: Vec<u8>,
    /// `starts[id]..starts[id + 1]` are piece `id`'s bytes.
    starts: Vec<u32>,
    /// Slots of `id + 1`; 0 is empty. A power of two, at most half full.
    slots: Vec<u32>,
}

impl PieceTable {
    fn new(pieces: &[&[u8]]) -> Self {
        let mut bytes = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
        let mut starts = Vec::with_capacity(pieces.len() + 1);
        for p in pieces {
            starts.push(bytes.len() as u32);
            bytes.extend_from_slice(p);
        }
        starts.push(bytes.len() as u32);
        let size = (pieces.len() * 2).next_power_of_two().max(2);
        let mut table = Self {
            bytes,
            starts,
            slots: vec![0; size],
        };
        for (id, p) in pieces.iter().enumerate() {
            // The first piece with given bytes wins, as in the reference's probe order.
            if p.is_empty() || table.get(p).is_some() {
                continue;
            }
            let mut at = table.home(p);
            while table.slots[at] != 0 {
                at = (at + 1) & (table.slots.len() - 1);
            }
            table.slots[at] = id as u32 + 1;
        }
        table
    }

    /// FNV-1a (64-bit) of the bytes, folded to a slot.
    fn home(&self, key: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in key {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h as usize) & (self.slots.len() - 1)
    }

    fn get(&self, key: &[u8]) -> Option<u32> {
        let mut at = self.home(key);
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                return None;
            }
            let id = (slot - 1) as usize;
            let piece = &self.bytes[self.starts[id] as usize..self.starts[id + 1] as usize];
            if piece == key {
                return Some(id as u32);
            }
            at = (at + 1) & (self.slots.len() - 1);
        }
    }
}

impl Tokenizer {
    pub(crate) fn new(v: VocabTables<'_>) -> Self {
        let min = v.scores.iter().copied().fold(f32::INFINITY, f32::min);
        let max_piece_bytes = v.pieces.iter().map(|p| p.len()).max().unwrap_or(1).max(1);
        Self {
            pieces: PieceTable::new(&v.pieces),
            unk_score: if min.is_finite() { min - 10.0 } else { -10.0 },
            scores: v.scores,
            normalise: v.normalise,
            unk: v.unk,
            max_piece_bytes,
            bos: v.bos,
            eos: v.eos,
        }
    }

    /// Content ids of `text` (no `<s>` / `</s>`), in order.
    pub fn content_ids(&self, text: &str) -> Vec<u32> {
        let normalised = self.normalise(text);
        // Character starts in the metaspaced buffer, plus its end.
        let mut buf = String::with_capacity(normalised.len() * 3 + 3);
        let mut starts = Vec::with_capacity(normalised.len() + 2);
        if normalised.first() != Some(&' ') {
            starts.push(0);
            buf.push(METASPACE);
        }
        for &c in &normalised {
            starts.push(buf.len());
            buf.push(if c == ' ' { METASPACE } else { c });
        }
        starts.push(buf.len());
        self.viterbi(buf.as_bytes(), &starts)
    }

    /// Steps 1 and 2: the normalisation map, then runs of spaces collapsed.
    fn normalise(&self, text: &str) -> Vec<char> {
        let mut out: Vec<char> = Vec::with_capacity(text.len());
        let push = |c: char, out: &mut Vec<char>| {
            if !(c == ' ' && out.last() == Some(&' ')) {
                out.push(c);
            }
        };
        for c in text.chars() {
            match self.normalise.get(&(c as u32)) {
                None => push(c, &mut out),
                Some(repl) => {
                    for &r in repl {
                        // Checked when the file was read.
                        push(char::from_u32(r).unwrap_or(' '), &mut out);
                    }
                }
            }
        }
        out
    }

    fn viterbi(&self, bytes: &[u8], starts: &[usize]) -> Vec<u32> {
        let n = starts.len() - 1;
        const NONE: f32 = -1e30;
        let mut best = vec![NONE; n + 1];
        // (piece id or u32::MAX for unknown, from character index)
        let mut back = vec![(u32::MAX, 0usize); n + 1];
        best[0] = 0.0;
        for i in 0..n {
            if best[i] <= -1e29 {
                continue;
            }
            let from = starts[i];
            for e in i + 1..=n {
                let len = starts[e] - from;
                if len > self.max_piece_bytes {
                    break;
                }
                if let Some(id) = self.pieces.get(&bytes[from..starts[e]]) {
                    if id != self.unk {
                        let s = best[i] + self.scores[id as usize];
                        if s > best[e] {
                            best[e] = s;
                            back[e] = (id, i);
                        }
                    }
                }
            }
            let s = best[i] + self.unk_score;
            if s > best[i + 1] {
                best[i + 1] = s;
                back[i + 1] = (u32::MAX, i);
            }
        }
        let mut ids = Vec::new();
        let mut at = n;
        while at > 0 {
            let (id, from) = back[at];
            ids.push(if id == u32::MAX { self.unk } else { id });
            at = from;
        }
        ids.reverse();
        ids
    }
}
