#!/usr/bin/env bash
# Side by side: our Trial and Python smdebug 1.0.34's create_trial on the same 10,000-step run.
#   bash benches/compare_trial.sh [STEPS]
# Needs the interop venv (bash .ci/setup-python) or SMDEBUG_PYTHON pointing at a Python with smdebug.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10000}
py=${SMDEBUG_PYTHON:-$(bash .ci/setup-python)}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo build --release -q -p smdebug-benches --bin make_bench_run --bin trial_bench
target/release/make_bench_run "$dir/run" "$steps"
sync
target/release/trial_bench "$dir/run"
"$py" benches/python_trial_bench.py "$dir/run"
