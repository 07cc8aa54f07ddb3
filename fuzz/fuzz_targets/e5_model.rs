#![no_main]
//! The e5 model file reader (`dossier_e5::E5Model::from_bytes`): whatever the bytes,
//! an error or a model — never a panic, an out-of-bounds read or an allocation sized by
//! an unchecked header field. A digest is checked before real loads, but the reader
//! must not rely on it.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = dossier_e5::format::ModelFile::parse(data) {
        // Whatever parsed must be usable without panicking.
        let _ = file.shape.hidden;
    }
    let _ = dossier_e5::E5Model::from_bytes(data, 1);
});
