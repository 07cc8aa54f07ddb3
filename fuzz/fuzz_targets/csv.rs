#![no_main]
//! `table.csv` through `parse_bytes`, the path `parse_file` takes after reading the file.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = dossier_fuzz::opts();
    let (items, problems) = dossier_ingest::parse_bytes("table.csv", data, &opts);
    dossier_fuzz::check(&items, &problems, &opts);
});
