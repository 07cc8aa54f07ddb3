#![no_main]
//! The server's keys file (`dossier_ingest::keys::parse_keys`): never a panic, and what
//! it accepts is consistent — every principal a valid id, no hash twice, `operator`
//! implying `admin`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(keys) = dossier_ingest::keys::parse_keys(text) {
        for (i, k) in keys.iter().enumerate() {
            assert!(dossier_core::ids::check_id("principal", &k.principal).is_ok());
            assert!(!k.operator || k.admin);
            assert!(keys[..i].iter().all(|o| o.hash != k.hash));
        }
    }
});
