//! The files of `smdebug-io/tests/data` that format tests read (Python smdebug's golden runs and
//! hook runs), found by extension.

use std::path::{Path, PathBuf};

/// Every file under `tests/data/<under>` whose extension is `extension`, at any depth.
pub fn files(under: &str, extension: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../smdebug-io/tests/data")
            .join(under),
    ];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                found.push(path);
            }
        }
    }
    found
}
