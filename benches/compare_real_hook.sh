#!/bin/bash
# Side by side on a run written by the real PyTorch hook (BENCHMARKS.md, "The real-hook run"):
#
#   bash benches/compare_real_hook.sh RUN PYTHON [ROUNDS] [TRIAL_BENCH...]
#
# RUN: the run (e.g. made by benches/make_pytorch_hook_run.py); PYTHON: a Python with smdebug
# 1.0.34 installed (numpy<2, protobuf 3.20.3). Each round runs every given trial_bench binary
# twice (default: this tree's release build; pass an older build too to compare it, in the
# same rounds) and Python smdebug once, so each Rust run has a Python run beside it. Prints
# each tool's lines as they are; the open + list and read phases are compared run by run.
set -euo pipefail
run=${1:?usage: compare_real_hook.sh RUN PYTHON [ROUNDS] [TRIAL_BENCH...]}
python=${2:?usage: compare_real_hook.sh RUN PYTHON [ROUNDS] [TRIAL_BENCH...]}
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
here=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
  cargo build --release -q -p smdebug-benches --bin trial_bench --manifest-path "$here/Cargo.toml"
  set -- "$here/target/release/trial_bench"
fi
# Warm the page cache, so both readers start alike.
find "$run" -type f -exec cat {} + > /dev/null
export TRIAL_BENCH_PHASES=${TRIAL_BENCH_PHASES:-stream}
for round in $(seq "$rounds"); do
  echo "== round $round, $(date -u +%H:%M:%S) UTC, $(uptime | sed 's/.*load/load/')"
  for i in 1 2; do
    for bin in "$@"; do
      echo "-- $bin"
      "$bin" "$run"
    done
  done
  echo "-- python smdebug"
  "$python" "$here/benches/python_trial_bench.py" "$run"
done
