#!/usr/bin/env bash
# Issue 16's etcd benchmark: lockgate's native etcd mutex against etcd's own Go
# concurrency.Mutex (bench/etcd-go), on one etcd member from the project's launcher, in one run.
# Writes one markdown section to $1, else $LOCKGATE_BENCH_OUT/etcd.md, else target/bench/etcd.md.
# Needs Debian's etcd-server (scripts/lib.sh installs it) and Go (its module proxy for
# go.etcd.io/etcd/client/v3). Extra arguments go to lockgate-bench bench-etcd
# (--seconds S per contended run, --pairs P per uncontended round, --rounds R).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${LOCKGATE_BENCH_OUT:-target/bench}/etcd.md}
shift || true
mkdir -p "$(dirname "$out")" target/etcd-go
cargo build --release -q -p lockgate-cli -p lockgate-conformance
(cd bench/etcd-go && go build -o ../../target/etcd-go/etcd-go .)
./target/release/lockgate-bench bench-etcd --go target/etcd-go/etcd-go --out "$out" \
  --command "scripts/bench_etcd.sh (lockgate-bench bench-etcd --go target/etcd-go/etcd-go)" "$@"
