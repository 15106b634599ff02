#!/usr/bin/env bash
# `cargo test -p <packages>`, with the test binaries run side by side instead of one after another.
#   scripts/cargo_tests.sh -p lockgate-core -p lockgate-cli ...
# Why: the integration binaries spend most of their time waiting on real servers (leases running
# out, sessions expiring, 500 SQL waiters queueing), and cargo runs binaries strictly one at a
# time: ~450 s of mostly idle waiting on a 2-core machine. Every test already starts its own
# servers on free ports through the launcher, so binaries share nothing but the machine.
# Each binary runs as cargo runs it (from its package's directory, its tests as cargo would
# schedule them); its output is printed whole, in cargo's order, once all have finished; the doc
# tests run last, through cargo. LOCKGATE_TEST_JOBS sets how many binaries run at once (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${LOCKGATE_TEST_JOBS:-3}
logs=$(mktemp -d "${TMPDIR:-/tmp}/lockgate-cargo-tests.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# Builds every test binary (cargo's own output goes to stderr) and lists them as
# "<index> <package dir> <executable> <source>", in cargo's order.
cargo test "$@" --no-run --message-format=json-render-diagnostics \
  | python3 -c '
import json, os, sys
n = 0
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        src = os.path.relpath(m["target"]["src_path"], os.path.dirname(m["manifest_path"]))
        print(n, os.path.dirname(m["manifest_path"]), m["executable"], src)
        n += 1
' > "$logs/binaries"

# Binary names (without cargo's hash) of the "<index> <dir> <exe> <src>" lines on stdin that are
# (with "in") or are not (with "out") in the space-separated list $2, in the list's order.
pick() {
  awk -v mode="$1" -v list=" $2 " '
    { b = $3; sub(/.*\//, "", b); sub(/-[0-9a-f]+$/, "", b); name[NR] = b; line[NR] = $0 }
    END {
      if (mode == "in") { n = split(list, want, " "); for (k = 1; k <= n; k++) for (i = 1; i <= NR; i++) if (name[i] == want[k]) print line[i] }
      else for (i = 1; i <= NR; i++) if (index(list, " " name[i] " ") == 0) print line[i]
    }'
}
# The SQL burst (1,500 waiters on two database servers) needs the machine's CPU to itself: beside
# other binaries its waiters time out and its neighbours' servers answer late. It runs alone, first.
alone="sql_burst"
# The slowest of the others start first, so none of them starts last (seconds on a 2-core machine).
slow="zookeeper_restart zookeeper_faults memcached_faults simulation etcd_faults redis_mutex run sql_faults simulation_zk"
pick in "$alone" < "$logs/binaries" > "$logs/alone"
{ pick in "$slow" < "$logs/binaries"; pick out "$alone $slow" < "$logs/binaries"; } > "$logs/shared"

export LOGS=$logs
# Runs the binaries listed on stdin, $1 at a time: each from its package's directory (as cargo
# does), its output and status kept.
run_binaries() {
  # shellcheck disable=SC2016
  xargs -P "$1" -L 1 bash -c '
    i=$0 dir=$1 exe=$2
    started=$SECONDS
    (cd "$dir" && exec "$exe") > "$LOGS/$i.out" 2>&1 && echo 0 > "$LOGS/$i.rc" || echo $? > "$LOGS/$i.rc"
    echo "$((SECONDS - started))" > "$LOGS/$i.took"
  '
}
run_binaries 1 < "$logs/alone"
run_binaries "$jobs" < "$logs/shared"

failed=()
while read -r i dir exe src; do
  echo "     Running $src (${exe#"$PWD"/}) in $(( $(cat "$logs/$i.took") )) s"
  cat "$logs/$i.out"
  [ "$(cat "$logs/$i.rc")" = 0 ] || failed+=("$src ($(basename "$dir"))")
done < "$logs/binaries"

echo "   Doc-tests"
cargo test "$@" --doc || failed+=("doc tests")

if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
