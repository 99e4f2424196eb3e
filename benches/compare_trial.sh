#!/usr/bin/env bash
# Side by side: our Trial and Python smdebug 1.0.34's create_trial on the same run.
#   bash benches/compare_trial.sh [STEPS]     # writes a synthetic run of STEPS steps (10,000)
#   bash benches/compare_trial.sh RUN_DIR     # an existing run (e.g. one written by Python's hook)
# Needs the interop venv (bash .ci/setup-python) or SMDEBUG_PYTHON pointing at a Python with smdebug.
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:-10000}
py=${SMDEBUG_PYTHON:-$(bash .ci/setup-python)}
cargo build --release -q -p smdebug-benches --bin make_bench_run --bin trial_bench
if [[ -d $arg ]]; then
  run=$arg
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  run=$dir/run
  target/release/make_bench_run "$run" "$arg"
  sync
fi
target/release/trial_bench "$run"
"$py" benches/python_trial_bench.py "$run"
