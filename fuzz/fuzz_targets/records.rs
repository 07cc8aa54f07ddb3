#![no_main]
//! A record table: the bytes before the first NUL are `t.schema.yaml`, the rest
//! `t.jsonl`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (schema, rows) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let opts = dossier_fuzz::opts();
    let (table, problems) =
        dossier_ingest::parse_table_bytes("t.jsonl", "t.schema.yaml", schema, rows, &opts);
    if let Some(t) = &table {
        dossier_fuzz::check_table(t);
    }
    dossier_fuzz::check(&[], &problems, &opts);
});
