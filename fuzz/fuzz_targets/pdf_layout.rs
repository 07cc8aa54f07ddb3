#![no_main]
//! poppler's XML (what `pdftohtml -xml` prints) through the PDF layout: lines,
//! paragraphs, headings, page offsets. poppler itself is not fuzzed here.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(xml) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(l) = dossier_ingest::pdf::layout(xml) {
        // Every page start is a char boundary of the body, in order.
        let mut last = 0;
        for (_, at) in &l.pages {
            assert!(*at >= last && l.body.is_char_boundary(*at));
            last = *at;
        }
    }
});
