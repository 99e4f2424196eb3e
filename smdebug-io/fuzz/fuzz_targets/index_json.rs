//! Arbitrary bytes through the index-file parser: never a panic; an error always names the file
//! and an offset inside the input; what parses re-serializes and parses back to the same value
//! (its usable entries: entries that locate no record are never written).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smdebug_format::Error;
use smdebug_format::{IndexFile, layout, parse_end_marker};

fuzz_target!(|data: &[u8]| {
    match IndexFile::parse(data, "index/000000000/000000000001_worker_0.json") {
        Ok(index) => {
            let again = IndexFile::parse(&index.to_json_bytes(), "again").expect("round trip");
            assert!(again.unusable_entries.is_empty());
            let usable = IndexFile {
                unusable_entries: Vec::new(),
                ..index.clone()
            };
            assert_eq!(again, usable);
            for e in &index.unusable_entries {
                assert!(!e.reason.is_empty());
            }
        }
        Err(Error::BadIndex { path, offset, .. }) => {
            assert_eq!(path, "index/000000000/000000000001_worker_0.json");
            assert!(offset <= data.len() as u64);
        }
        Err(other) => panic!("unexpected error kind: {other}"),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = layout::parse_index_file(text);
        let _ = layout::parse_event_file(text);
        let _ = layout::parse_collections_file(text);
    }
    let _ = parse_end_marker(data);
});
