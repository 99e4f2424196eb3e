//! A rule's selection works its names out again only when the run's names moved: the same
//! names (the same list, not matched again) while nothing new arrived, the new tensor as soon
//! as a step brings one, and never another trial's names.

use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_io::crafted::{scalar, write_step};
use smdebug_read::trial::Trial;
use smdebug_rules::TensorSelection;

fn step(run: &std::path::Path, s: u64, names: &[&str]) {
    let records: Vec<_> = names.iter().map(|n| scalar(n, s as f32)).collect();
    write_step(run, s, "worker_0", Mode::Train, s, &records);
}

#[test]
fn names_follow_the_run_and_are_kept_while_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("a");
    step(&run, 0, &["loss", "fc1.weight", "loss.labels"]);
    step(&run, 1, &["loss", "fc1.weight", "loss.labels"]);
    let trial = Trial::open(&run).unwrap();
    let losses = TensorSelection::losses("Test", &[], &[], false).unwrap();

    let first = losses.names("Test", &trial).unwrap();
    assert_eq!(&first[..], ["loss"]);
    let again = losses.names("Test", &trial).unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "matched again with nothing new"
    );

    step(&run, 2, &["loss", "fc1.weight", "loss.labels", "val_loss"]);
    let moved = losses.names("Test", &trial).unwrap();
    assert_eq!(&moved[..], ["loss", "val_loss"]);

    // Another trial with as many names as the first had: its own names, not the kept ones.
    let other = dir.path().join("b");
    step(&other, 0, &["train_loss", "w", "b", "c"]);
    let other = Trial::open(&other).unwrap();
    assert_eq!(&losses.names("Test", &other).unwrap()[..], ["train_loss"]);
    assert_eq!(
        &losses.names("Test", &trial).unwrap()[..],
        ["loss", "val_loss"]
    );
}
