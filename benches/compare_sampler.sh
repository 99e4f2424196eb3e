#!/usr/bin/env bash
# The sampler's own CPU cost at 100 ms and 500 ms, side by side with a psutil-based Python
# sampler collecting the same metrics, over the same duration.
#   bash benches/compare_sampler.sh [SECONDS]
# Needs psutil (pip install psutil; in the interop venv after bash .ci/setup-python).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
py=${SMDEBUG_PYTHON:-python3}
cargo build --release -q -p smdebug-cli
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for ms in 100 500; do
    echo "== interval ${ms} ms, ${secs} s"
    target/release/smdebug profile --interval "$ms" --out "$dir/rust-$ms" -- sleep "$secs" 2>&1 | sed 's/^/rust: /'
    "$py" benches/psutil_sampler.py "$(awk "BEGIN{print $ms/1000}")" "$secs" "$dir/py-$ms.json"
done
