//! `rules_bench RUN`: the Rust side of the rules comparison with Python smdebug
//! (`benches/python_rule_bench.py RUN` is the other side). Times, each from opening the run:
//! the three rules the Python side also implements (VanishingGradient, ExplodingTensor, AllZero
//! with SageMaker's definitions), then every built-in rule that needs no parameter.

#![forbid(unsafe_code)]

use std::time::Instant;

use smdebug_rules::{RuleRunner, RuleSpec, Status, builtin_rules};

fn run(dir: &str, names: &[&str]) -> Result<(f64, usize, usize), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let mut builder = RuleRunner::builder(dir).write_into_run(false);
    for n in names {
        builder = builder.spec(RuleSpec::parse(n)?);
    }
    let summary = builder.build()?.run_offline()?;
    let fired = summary
        .rules
        .iter()
        .filter(|r| r.status == Status::IssuesFound)
        .count();
    let errors = summary
        .rules
        .iter()
        .filter(|r| r.status == Status::Error)
        .count();
    Ok((t.elapsed().as_secs_f64(), fired, errors))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: rules_bench RUN")?;
    let three = ["VanishingGradient", "ExplodingTensor", "AllZero"];
    let (secs, fired, errors) = run(&dir, &three)?;
    println!(
        "rust: 3 rules (VanishingGradient, ExplodingTensor, AllZero): {secs:.3} s, {fired} fired, {errors} errors"
    );
    // Rules that need a parameter (TensorVariance's thresholds, SimilarAcrossRuns' other run)
    // are left out, as `smdebug rules RUN` does without --rule.
    let all: Vec<&str> = builtin_rules()
        .iter()
        .map(|r| r.name)
        .filter(|n| !["TensorVariance", "SimilarAcrossRuns"].contains(n))
        .collect();
    let (secs, fired, errors) = run(&dir, &all)?;
    println!(
        "rust: all {} parameter-free built-in rules: {secs:.3} s, {fired} fired, {errors} errors",
        all.len()
    );
    Ok(())
}
