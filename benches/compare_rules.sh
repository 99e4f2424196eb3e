#!/usr/bin/env bash
# Side by side: our rule runner and Python smdebug 1.0.34's invoke_rule on the same run.
#   bash benches/compare_rules.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10000}
py=${SMDEBUG_PYTHON:-$(bash .ci/setup-python)}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo build --release -q -p smdebug-benches --bin make_bench_run --bin rules_bench
target/release/make_bench_run "$dir/run" "$steps"
target/release/rules_bench "$dir/run"
"$py" benches/python_rule_bench.py "$dir/run"
