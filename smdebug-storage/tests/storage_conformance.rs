//! One conformance suite for every storage backend: local disk, `memory://`, and S3 through a
//! real moto server started by the test (`python3 -m moto.server`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smdebug_storage::Error;
use smdebug_storage::testing::{MotoServer, free_port, s3_options};
use smdebug_storage::{Storage, StorageOptions, open_storage, open_storage_with};

/// Everything a backend must do, the same way.
fn conformance(store: &dyn Storage) {
    let name = store.describe().to_string();

    // Missing things.
    assert!(
        store.list("").unwrap().is_empty(),
        "{name}: fresh store is empty"
    );
    assert!(
        store.list("index").unwrap().is_empty(),
        "{name}: missing folder lists empty"
    );
    assert_eq!(store.size("nope.json").unwrap(), None);
    let err = store.get("nope/x.json").unwrap_err();
    assert!(err.is_not_found(), "{name}: {err}");
    assert!(err.to_string().contains("nope/x.json"), "{name}: {err}");
    store.delete("nope/x.json").unwrap();

    // put / get / size / get_range.
    store
        .put("a/b/c.bin", Bytes::from_static(b"0123456789"))
        .unwrap();
    assert_eq!(&store.get("a/b/c.bin").unwrap()[..], b"0123456789");
    assert_eq!(store.size("a/b/c.bin").unwrap(), Some(10));
    assert_eq!(&store.get_range("a/b/c.bin", 2..5).unwrap()[..], b"234");
    assert_eq!(
        &store.get_range("a/b/c.bin", 7..100).unwrap()[..],
        b"789",
        "{name}: clamped at the end"
    );
    assert!(store.get_range("a/b/c.bin", 4..4).unwrap().is_empty());
    assert!(
        store.get_range("a/b/c.bin", 10..12).is_err(),
        "{name}: range past the end"
    );
    assert!(
        store
            .get_range("missing.bin", 0..3)
            .unwrap_err()
            .is_not_found()
    );

    // get_range_into: the same bytes and errors as get_range, into the caller's buffer.
    let into = |path: &str, start: u64, len: usize| {
        let mut buf = vec![b'-'; len + 2];
        store
            .get_range_into(path, start, &mut buf[..len])
            .map(|n| (n, buf))
    };
    let (n, buf) = into("a/b/c.bin", 2, 3).unwrap();
    assert_eq!((n, &buf[..]), (3, &b"234--"[..]), "{name}");
    let (n, buf) = into("a/b/c.bin", 7, 93).unwrap();
    assert_eq!(
        (n, &buf[..3]),
        (3, &b"789"[..]),
        "{name}: clamped at the end"
    );
    assert!(
        buf[3..].iter().all(|&b| b == b'-'),
        "{name}: nothing past it"
    );
    assert_eq!(into("a/b/c.bin", 4, 0).unwrap().0, 0);
    assert!(
        into("a/b/c.bin", 10, 2).is_err(),
        "{name}: range past the end"
    );
    let err = into("missing.bin", 0, 3).unwrap_err();
    assert!(err.is_not_found(), "{name}: {err}");
    assert!(
        into("../outside.bin", 0, 3).is_err(),
        "{name}: outside the root"
    );

    // put_parts writes the concatenation; a second put replaces the object whole.
    let parts = vec![
        Bytes::from_static(b"head:"),
        Bytes::from(vec![7u8; 100_000]),
        Bytes::from_static(b":tail"),
    ];
    store.put_parts("a/b/c.bin", parts).unwrap();
    let got = store.get("a/b/c.bin").unwrap();
    assert_eq!(got.len(), 100_010);
    assert!(got.starts_with(b"head:") && got.ends_with(b":tail"));

    // Listing: sorted, relative, recursive, folder prefixes only, no temporary files.
    for p in [
        "index/000000001/000000001000_worker_0.json",
        "index/000000000/000000000002_worker_1.json",
        "index/000000000/000000000002_worker_0.json",
        "index/000000000/000000000010_worker_0.json",
        "index-other/x.json",
        "events/000000000002/000000000002_worker_0.tfevents",
    ] {
        store.put(p, Bytes::from(p.as_bytes().to_vec())).unwrap();
    }
    let index = store.list("index").unwrap();
    assert_eq!(
        index,
        vec![
            "index/000000000/000000000002_worker_0.json",
            "index/000000000/000000000002_worker_1.json",
            "index/000000000/000000000010_worker_0.json",
            "index/000000001/000000001000_worker_0.json",
        ],
        "{name}"
    );
    assert_eq!(
        store.list("index/").unwrap(),
        index,
        "{name}: trailing slash"
    );
    assert_eq!(
        store.list("index/000000001").unwrap(),
        vec!["index/000000001/000000001000_worker_0.json"]
    );
    let all = store.list("").unwrap();
    assert_eq!(all.len(), 7, "{name}: {all:?}");
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);

    // list_after: strictly after the offset, which need not exist.
    assert_eq!(
        store
            .list_after("index", "index/000000000/000000000002_worker_0.json")
            .unwrap(),
        index[1..].to_vec(),
        "{name}"
    );
    assert_eq!(
        store
            .list_after("index", "index/000000000/000000000003")
            .unwrap(),
        index[2..].to_vec()
    );
    assert_eq!(
        store.list_after("index", "index/000000000/~").unwrap(),
        index[3..].to_vec(),
        "{name}: skips a folder"
    );
    assert!(
        store
            .list_after("index", "index/000000001/000000001000_worker_0.json")
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.list_after("index", "").unwrap(), index);

    // delete.
    store.delete("index-other/x.json").unwrap();
    assert!(store.list("index-other").unwrap().is_empty());
    assert_eq!(store.size("index-other/x.json").unwrap(), None);

    // Paths that escape the root are refused.
    for bad in ["../x", "/abs", "a//b", "a/./b"] {
        let err = store.put(bad, Bytes::new()).unwrap_err();
        assert!(err.to_string().contains(bad), "{name}: {err}");
    }

    // Concurrent atomic puts of one path: a reader sees one whole version, never a mix.
    let versions: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 300_000]).collect();
    std::thread::scope(|s| {
        for v in &versions {
            s.spawn(|| {
                for _ in 0..3 {
                    store.put("race.bin", Bytes::from(v.clone())).unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..20 {
                if let Ok(b) = store.get("race.bin") {
                    assert_eq!(b.len(), 300_000, "{name}: torn read");
                    assert!(b.iter().all(|&x| x == b[0]), "{name}: mixed versions");
                }
            }
        });
    });
    assert!(
        store.list("").unwrap().iter().all(|p| !p.contains(".tmp")),
        "{name}: temp files listed"
    );

    // Append where supported.
    if store.supports_append() {
        store.append("tb/f", b"ab").unwrap();
        store.append("tb/f", b"cd").unwrap();
        assert_eq!(&store.get("tb/f").unwrap()[..], b"abcd");
    } else {
        assert!(store.append("tb/f", b"ab").is_err());
    }
}

#[test]
fn local_disk_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_storage(dir.path().join("run").to_str().unwrap()).unwrap();
    assert!(store.describe().starts_with("local disk"));
    conformance(store.as_ref());
    // file:// URLs are the same backend.
    let url = url::Url::from_file_path(dir.path().join("run")).unwrap();
    let again = open_storage(url.as_str()).unwrap();
    assert_eq!(again.list("index").unwrap().len(), 4);
}

#[test]
fn memory_store_conforms_and_is_shared_in_the_process() {
    let store = open_storage("memory://conformance/run").unwrap();
    conformance(store.as_ref());
    let other_handle = open_storage("memory://conformance/run").unwrap();
    assert_eq!(other_handle.list("index").unwrap().len(), 4);
    // Another name, or another root in the same store, is separate.
    assert!(
        open_storage("memory://elsewhere/run")
            .unwrap()
            .list("")
            .unwrap()
            .is_empty()
    );
    assert!(
        open_storage("memory://conformance/run2")
            .unwrap()
            .list("")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn s3_through_moto_conforms() {
    let moto = MotoServer::start();
    moto.create_bucket("smdebug-conformance");
    let store: Arc<dyn Storage> =
        open_storage_with("s3://smdebug-conformance/runs/one", &s3_options(moto.port)).unwrap();
    assert_eq!(store.describe(), "s3://smdebug-conformance/runs/one");
    conformance(store.as_ref());
    // A second run under the same bucket is separate; the bucket root sees both.
    let root = open_storage_with("s3://smdebug-conformance", &s3_options(moto.port)).unwrap();
    assert!(root.list("runs/one/index").unwrap().len() == 4);

    // A large object goes up in parts and comes back whole.
    let big: Vec<u8> = (0..70 << 20).map(|i: u32| (i % 251) as u8).collect();
    store
        .put_parts("big.bin", vec![Bytes::from(big.clone())])
        .unwrap();
    assert_eq!(store.size("big.bin").unwrap(), Some(big.len() as u64));
    assert_eq!(
        &store.get_range("big.bin", 50_000_000..50_000_010).unwrap()[..],
        &big[50_000_000..50_000_010]
    );
}

#[test]
fn s3_endpoint_that_is_down_fails_fast_with_a_clear_error() {
    let port = free_port(); // nothing listens here
    let mut opts = s3_options(port);
    opts.max_retries = 1;
    opts.retry_timeout = Duration::from_secs(2);
    let store = open_storage_with("s3://no-such-server/run", &opts).unwrap();
    let started = Instant::now();
    let err = store
        .put("index/x.json", Bytes::from_static(b"{}"))
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let msg = err.to_string();
    assert!(matches!(err, Error::Failed { op: "put", .. }), "{msg}");
    assert!(
        msg.contains("s3://no-such-server/run") && msg.contains("index/x.json"),
        "{msg}"
    );
}

#[test]
fn bad_locations_and_options_are_refused() {
    assert!(matches!(
        open_storage("s3://"),
        Err(Error::InvalidLocation { .. })
    ));
    let err = open_storage_with(
        "s3://bucket/run",
        &StorageOptions::default().with("aws_endpoit", "http://x"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("aws_endpoit"), "{err}");
    assert!(matches!(
        open_storage("nosuchscheme://x/y"),
        Err(Error::InvalidLocation { .. })
    ));
}
