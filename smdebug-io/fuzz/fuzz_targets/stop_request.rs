//! Arbitrary bytes as a run's `stop_request.json`, read as the training job's stop watcher
//! and the dashboard read it: never a panic; what is refused is a `BadStopRequest`; a request
//! that reads has a reason and rule fit to show (no control or invisible characters, cut at
//! `MAX_REASON_CHARS`), which cleaning again leaves as it is.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use smdebug_io::stop::read_stop_request;
use smdebug_format::stop::MAX_REASON_CHARS;
use smdebug_format::layout::STOP_REQUEST_FILE;
use smdebug_format::stop::sanitize_reason;
use smdebug_io::Error;
use smdebug_storage::{Storage, open_storage};

fn store() -> &'static Arc<dyn Storage> {
    static STORE: OnceLock<Arc<dyn Storage>> = OnceLock::new();
    STORE.get_or_init(|| open_storage("memory://fuzz/stop-request").unwrap())
}

fn fit_to_show(text: &str) {
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(
        !text
            .chars()
            .any(|c| matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')),
        "{text:?}"
    );
    if text.chars().count() <= MAX_REASON_CHARS {
        assert_eq!(sanitize_reason(text), text);
    } else {
        assert!(text.ends_with(" more characters)"), "{text:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let store = store();
    store
        .put(STOP_REQUEST_FILE, bytes::Bytes::copy_from_slice(data))
        .unwrap();
    match read_stop_request(store.as_ref()) {
        Ok(Some(request)) => {
            fit_to_show(&request.reason);
            if let Some(rule) = &request.rule {
                fit_to_show(rule);
            }
        }
        Ok(None) => panic!("the file is there"),
        Err(Error::BadStopRequest { reason, .. }) => assert!(!reason.is_empty()),
        Err(e) => panic!("not a BadStopRequest: {e:?}"),
    }
});
