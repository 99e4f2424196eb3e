//! Reading a 10,000-step run (7 tensors a step): opening it and listing steps and tensor names,
//! and reading every value. The side-by-side with Python smdebug on the same run is
//! `benches/compare_trial.sh` (numbers in BENCHMARKS.md).
//!
//! `cargo bench -p smdebug-benches --bench trial_read`

#![forbid(unsafe_code)]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use smdebug_read::trial::Trial;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run = run.to_str().unwrap();
    smdebug_benches::write_bench_run(run, 10_000);

    let mut g = c.benchmark_group("trial_10000_steps_x7");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("open + list steps + tensor names", |b| {
        b.iter(|| {
            let t = Trial::open(run).unwrap();
            (
                t.steps(None).unwrap().len(),
                t.tensor_names().unwrap().len(),
            )
        })
    });
    let trial = Trial::open(run).unwrap();
    let names = trial.tensor_names().unwrap();
    g.bench_function("read every value", |b| {
        b.iter(|| {
            let mut n = 0;
            for name in &names {
                n += trial
                    .tensor(name)
                    .unwrap()
                    .values(None, None)
                    .unwrap()
                    .len();
            }
            n
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
