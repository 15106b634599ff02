#!/usr/bin/env bash
# Issue 26's benchmark: `lockgate run NAME -- true` per backend against `flock -x` and
# `etcdctl lock NAME true` (bench/cli/bench_cli.py), on servers from the project's launcher.
# Writes one markdown section to $1, else $LOCKGATE_BENCH_OUT/cli.md, else target/bench/cli.md.
# Extra arguments go to bench_cli.py (--runs N, default 15).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${LOCKGATE_BENCH_OUT:-target/bench}/cli.md}
shift || true
mkdir -p "$(dirname "$out")"
cargo build --release -q -p lockgate-cli -p lockgate-conformance
python3 bench/cli/bench_cli.py --lockgate target/release/lockgate --launcher target/release/test-servers \
  --command "scripts/bench_cli.sh" "$@" > "$out"
cat "$out"
