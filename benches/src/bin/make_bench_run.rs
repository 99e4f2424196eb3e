//! `make_bench_run DIR [STEPS]`: writes the comparison run (default 10,000 steps x 7 tensors).

#![forbid(unsafe_code)]

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: make_bench_run DIR [STEPS]");
    let steps: u64 = args
        .next()
        .map(|s| s.parse().expect("STEPS is a number"))
        .unwrap_or(10_000);
    let t = std::time::Instant::now();
    let records = smdebug_benches::write_bench_run(&dir, steps);
    println!(
        "wrote {records} records over {steps} steps to {dir} in {:.2?}",
        t.elapsed()
    );
}
