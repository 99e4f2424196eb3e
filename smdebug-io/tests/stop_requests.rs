//! Stop requests through a run's storage: what the runner writes, what the watcher hears.

use std::sync::Arc;
use std::time::Duration;

use smdebug_core::StopSignal;
use smdebug_format::layout::STOP_REQUEST_FILE;
use smdebug_format::stop::StopRequest;
use smdebug_io::Error;
use smdebug_io::stop::{StopOutcome, StopWatcher, read_stop_request, request_stop};
use smdebug_storage::testing::{CountingStorage, wait_for, wait_until};
use smdebug_storage::{Storage, open_storage};

/// The stop reason `signal` is given, within 30 s.
fn wait_for_stop(signal: &StopSignal) -> String {
    wait_for(Duration::from_secs(30), "the stop request", || {
        signal.cause().map(|c| c.reason)
    })
}

/// Waits until the watcher reading `counting` has looked at the request file `looks` more times.
fn wait_for_looks(counting: &CountingStorage, looks: u64) {
    let from = counting.calls().ranges;
    wait_until(
        Duration::from_secs(30),
        &format!("{looks} looks at the stop request"),
        || counting.calls().ranges >= from + looks,
    );
}

#[test]
fn a_request_round_trips_with_its_rule_and_step() {
    let store = open_storage("memory://stop-tests/round-trip").unwrap();
    assert_eq!(read_stop_request(store.as_ref()).unwrap(), None);
    let mut request = StopRequest::new("VanishingGradient fired at step 12");
    request.rule = Some("VanishingGradient".into());
    request.step = Some(12);
    request_stop(store.as_ref(), &request).unwrap();
    assert_eq!(read_stop_request(store.as_ref()).unwrap(), Some(request));
}

#[test]
fn a_watcher_on_an_object_store_sets_the_signal() {
    let location = "memory://stop-tests/watched";
    let signal = StopSignal::default();
    let watcher = StopWatcher::with_storage(
        open_storage(location).unwrap(),
        signal.clone(),
        Duration::from_millis(20),
    )
    .unwrap();
    request_stop(
        open_storage(location).unwrap().as_ref(),
        &StopRequest::new("asked by a test"),
    )
    .unwrap();
    assert_eq!(wait_for_stop(&signal), "asked by a test");
    watcher.stop();
}

#[test]
fn a_request_left_by_an_earlier_job_does_not_stop_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().to_str().unwrap();
    let store = open_storage(run).unwrap();
    request_stop(store.as_ref(), &StopRequest::new("the previous job")).unwrap();
    let signal = StopSignal::default();
    let counting = Arc::new(CountingStorage::new(store.clone()));
    let watcher = StopWatcher::with_storage(
        Arc::clone(&counting) as Arc<dyn Storage>,
        signal.clone(),
        Duration::from_millis(10),
    )
    .unwrap();
    // Looks enough to have acted on the old request if it were taken for this job's.
    wait_for_looks(&counting, 3);
    assert_eq!(signal.cause(), None);
    assert!(!dir.path().join(STOP_REQUEST_FILE).exists());
    watcher.stop();
}

#[test]
fn a_damaged_request_is_an_error_naming_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    store
        .put(STOP_REQUEST_FILE, "{\"reason\": ".into())
        .unwrap();
    let err = read_stop_request(store.as_ref()).unwrap_err();
    assert!(matches!(err, Error::BadStopRequest { .. }), "{err:?}");
    assert!(
        err.to_string().contains(dir.path().to_str().unwrap()),
        "{err}"
    );
}

#[test]
fn a_reason_is_bounded_and_its_control_characters_dropped() {
    use smdebug_format::stop::MAX_REASON_CHARS;
    use smdebug_format::stop::MAX_STOP_REQUEST_BYTES;
    use smdebug_format::stop::sanitize_reason;
    let store = open_storage("memory://stop-tests/hostile-reason").unwrap();
    // A reason with terminal escapes and line breaks, 20,000 characters long, written
    // directly (not through StopRequest::new, which cleans it already).
    let hostile = format!(
        "\u{1b}[2J\u{1b}]0;pwned\u{7}loss\r\nexploded{}",
        "x".repeat(20_000)
    );
    let json =
        serde_json::json!({"reason": hostile, "rule": "a\u{1b}[31mrule", "requested_at": 1.0});
    store
        .put(STOP_REQUEST_FILE, json.to_string().into_bytes().into())
        .unwrap();
    let read = read_stop_request(store.as_ref()).unwrap().unwrap();
    assert!(
        !read.reason.chars().any(char::is_control),
        "{:?}",
        &read.reason[..40]
    );
    assert!(
        read.reason.starts_with("[2J ]0;pwned loss exploded"),
        "{}",
        &read.reason[..40]
    );
    assert!(read.reason.chars().count() < MAX_REASON_CHARS + 40);
    assert!(read.reason.ends_with("more characters)"), "{}", read.reason);
    assert_eq!(read.rule.as_deref(), Some("a [31mrule"));
    assert_eq!(
        StopRequest::new("a\nb\u{1b}c").reason,
        sanitize_reason("a\nb\u{1b}c")
    );
    assert_eq!(sanitize_reason("a\nb\u{1b}c"), "a b c");

    // A 1.9 MB request is refused with its size named, not read.
    let big = serde_json::json!({"reason": "y".repeat(1_900_000)});
    store
        .put(STOP_REQUEST_FILE, big.to_string().into_bytes().into())
        .unwrap();
    match read_stop_request(store.as_ref()) {
        Err(Error::BadStopRequest { reason, .. }) => {
            assert!(reason.contains("1900013 bytes"), "{reason}");
            assert!(
                reason.contains(&MAX_STOP_REQUEST_BYTES.to_string()),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn direction_overrides_and_zero_width_characters_are_dropped_from_a_reason() {
    use smdebug_format::stop::sanitize_reason;
    // "loss ok" that a terminal or a page would draw as "ko ssol" from the override on, with
    // zero-width spaces, a joiner, a word joiner and a byte-order mark between the letters.
    let hostile = "\u{202E}lo\u{200B}ss\u{200D} o\u{2060}k\u{FEFF}\u{2066}!\u{2069}\u{200F}";
    assert_eq!(sanitize_reason(hostile), "loss ok!");
    let store = open_storage("memory://stop-tests/bidi").unwrap();
    let json = serde_json::json!({"reason": hostile, "rule": "\u{202B}Rule\u{202C}"});
    store
        .put(STOP_REQUEST_FILE, json.to_string().into_bytes().into())
        .unwrap();
    let read = read_stop_request(store.as_ref()).unwrap().unwrap();
    assert_eq!(read.reason, "loss ok!");
    assert_eq!(read.rule.as_deref(), Some("Rule"));
    // Visible characters of other scripts stay.
    assert_eq!(sanitize_reason("perte élevée, 损失"), "perte élevée, 损失");
}

/// Every log line of this test binary, for the tests that check what was logged.
static LOGGED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        LOGGED
            .lock()
            .unwrap()
            .push(format!("{} {}", record.level(), record.args()));
    }
    fn flush(&self) {}
}

#[test]
fn an_unreadable_request_is_logged_with_its_reason_and_kept_and_does_not_stop_the_job() {
    static LOGGER: Capture = Capture;
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let store = open_storage(run.to_str().unwrap()).unwrap();
    let signal = StopSignal::default();
    let counting = Arc::new(CountingStorage::new(store.clone()));
    let watcher = StopWatcher::with_storage(
        Arc::clone(&counting) as Arc<dyn Storage>,
        signal.clone(),
        Duration::from_millis(10),
    )
    .unwrap();
    // Until the watcher has reported `why`, and then looked twice more at the same file (which
    // must not report it again).
    let heard = |why: &str| {
        wait_until(
            Duration::from_secs(30),
            &format!("the problem {why:?}"),
            || watcher.problems().iter().any(|p| p.contains(why)),
        );
        wait_for_looks(&counting, 2);
    };
    let request = run.join(STOP_REQUEST_FILE);
    // Each unreadable in its own way, then a FIFO (no writer: a blocking open would wait).
    let cases = [
        ("{\"reason\": ", "EOF while parsing"),
        ("{\"reason\": 12}", "invalid type: integer `12`"),
        ("", "stop_request.json is empty"),
    ];
    let too_large = "70013 bytes, more than the 65536";
    let fifo = "a FIFO, not a regular file";
    for (text, why) in cases {
        std::fs::write(&request, text).unwrap();
        heard(why);
    }
    std::fs::write(
        &request,
        serde_json::json!({"reason": "w".repeat(70_000)}).to_string(),
    )
    .unwrap();
    heard(too_large);
    std::fs::remove_file(&request).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&request)
        .status()
        .unwrap();
    assert!(made.success());
    heard(fifo);
    assert_eq!(signal.cause(), None, "no unreadable request stops the job");
    let problems = watcher.problems();
    let expected = cases.iter().map(|(_, why)| *why).chain([too_large, fifo]);
    for why in expected {
        let found: Vec<&String> = problems.iter().filter(|p| p.contains(why)).collect();
        assert_eq!(found.len(), 1, "{why} once among {problems:#?}");
        assert!(found[0].contains(run.to_str().unwrap()), "{}", found[0]);
        let logged = LOGGED.lock().unwrap();
        assert_eq!(
            logged
                .iter()
                .filter(|l| l.starts_with("ERROR") && l.contains(why))
                .count(),
            1,
            "{why} logged once: {logged:#?}"
        );
    }
    // Mended, it stops the job.
    std::fs::remove_file(&request).unwrap();
    request_stop(store.as_ref(), &StopRequest::new("mended")).unwrap();
    assert_eq!(wait_for_stop(&signal), "mended");
    let stopped = watcher.stop();
    assert!(stopped.ended);
    assert_eq!(stopped.problems, problems);
}

#[test]
fn a_later_request_does_not_replace_the_one_the_job_stops_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    let mut first = StopRequest::new("ExplodingTensor fired at step 3");
    first.rule = Some("ExplodingTensor".into());
    first.step = Some(3);
    assert_eq!(
        request_stop(store.as_ref(), &first).unwrap(),
        StopOutcome::Written
    );
    let mut later = StopRequest::new("DeadRelu fired at step 10");
    later.rule = Some("DeadRelu".into());
    later.step = Some(10);
    assert_eq!(
        request_stop(store.as_ref(), &later).unwrap(),
        StopOutcome::AlreadyRequested(first.clone())
    );
    assert_eq!(read_stop_request(store.as_ref()).unwrap(), Some(first));
    // A file that is not a stop request is no request: it is replaced.
    std::fs::write(dir.path().join("stop_request.json"), b"{not json").unwrap();
    assert_eq!(
        request_stop(store.as_ref(), &later).unwrap(),
        StopOutcome::Written
    );
    assert_eq!(read_stop_request(store.as_ref()).unwrap(), Some(later));
}
