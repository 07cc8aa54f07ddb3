#![no_main]
//! `chunk_text` on any text, with the bound taken from the first byte, checked for the
//! promises its proptest states; and the same bytes as a `.txt` file.

use dossier_ingest::{chunk_text, parse_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if let Ok(body) = std::str::from_utf8(rest) {
        let max = usize::from(first % 128);
        let spans = chunk_text(body, max);
        let mut prev_end = 0;
        let mut covered = vec![false; body.len()];
        for s in &spans {
            assert!(prev_end <= s.start && s.start < s.end && s.end <= body.len());
            prev_end = s.end;
            let t = body.get(s.start..s.end).expect("span on char boundaries");
            assert!(t.chars().count() <= max.max(1));
            assert_eq!(t, t.trim());
            covered[s.start..s.end].iter_mut().for_each(|c| *c = true);
        }
        for (i, c) in body.char_indices() {
            assert!(c.is_whitespace() || covered[i], "{c:?} at {i} not covered");
        }
    }
    let opts = dossier_fuzz::opts();
    let (items, problems) = parse_bytes("notes.txt", rest, &opts);
    dossier_fuzz::check(&items, &problems, &opts);
});
