//! Locations that cannot be a run: ill-formed URLs are refused rather than taken as local
//! folders, and an S3 bucket that does not exist is said to be missing, never taken for an
//! empty run.

use smdebug_read::trial::Trial;
use smdebug_storage::testing::MotoServer;
use smdebug_storage::{open_storage, open_storage_with};

#[test]
fn ill_formed_urls_and_unknown_schemes_are_refused() {
    let cwd = std::env::current_dir().unwrap();
    for (location, says) in [
        ("s3:/bucket/x", "s3://bucket/x"),
        ("s3:bucket/x", "s3://bucket/x"),
        ("S3:/bucket/x", "s3://bucket/x"),
        ("memory:/doc", "memory://doc"),
        ("foo://x/run", "unknown scheme"),
        ("foo:/x/run", "not one smdebug opens"),
    ] {
        let err = open_storage(location).unwrap_err().to_string();
        assert!(
            err.contains(location) && err.contains(says),
            "{location}: {err}"
        );
        let err = Trial::open(location).err().expect("refused").to_string();
        assert!(
            err.contains(says),
            "the reader refuses {location} too: {err}"
        );
    }
    assert!(!cwd.join("s3:").exists() && !cwd.join("foo:").exists());
    // Paths stay paths: relative, absolute, with a colon further on, and `./s3:` spelled out.
    let dir = tempfile::tempdir().unwrap();
    for name in ["run", "a:b", "./s3:/x"] {
        let path = dir.path().join(name);
        let store = open_storage(path.to_str().unwrap()).unwrap();
        store.put("f", bytes::Bytes::from_static(b"1")).unwrap();
        assert!(path.join("f").exists(), "{name}");
    }
}

#[test]
fn a_missing_bucket_is_named_and_never_read_as_an_empty_run() {
    let moto = MotoServer::start();
    moto.create_bucket("bucket");
    let store = open_storage_with("s3://no-such-bucket/run", &moto.options()).unwrap();
    // (A HEAD request's answer has no body to tell a missing bucket from a missing object, so
    // `size` cannot say; a listing, a read and a write can.)
    for err in [
        store.get("training_job_end.ts").unwrap_err(),
        store.list("index").unwrap_err(),
        store.put("x", bytes::Bytes::from_static(b"1")).unwrap_err(),
    ] {
        assert!(!err.is_not_found(), "{err}");
        assert!(err.to_string().contains("no such bucket"), "{err}");
    }
    // The bucket that exists: a missing object is just missing.
    let store = open_storage_with("s3://bucket/run", &moto.options()).unwrap();
    assert_eq!(store.size("training_job_end.ts").unwrap(), None);
    assert!(store.get("training_job_end.ts").unwrap_err().is_not_found());
}

#[test]
fn a_plain_http_endpoint_without_allow_http_is_refused_naming_the_setting() {
    let moto = MotoServer::start();
    let mut options = moto.options();
    options.options.remove("aws_allow_http");
    let err = open_storage_with("s3://bucket/run", &options)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("AWS_ALLOW_HTTP") && err.contains(&moto.endpoint()),
        "{err}"
    );
    let allowed = options.with("aws_allow_http", "true");
    open_storage_with("s3://bucket/run", &allowed).unwrap();
}
