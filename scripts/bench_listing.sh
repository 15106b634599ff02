#!/usr/bin/env bash
# Issue 25's operator benchmark: per backend, `inspect` of a lock with 1,000 waiters and `list`
# over 10,000 held locks (pages of 1,000), time and the requests the server received where it
# counts them (lockgate-bench bench-listing). Servers from the project's launcher, one backend at
# a time, each stopped by its own pid. Writes one markdown section to $1, else
# $LOCKGATE_BENCH_OUT/listing.md, else target/bench/listing.md. Extra arguments go to every
# bench-listing run (--locks N, --waiters N); BENCH_KINDS="single etcd" runs only those backends.
# A Redlock has no queue: its inspect reads the holder alone (--waiters 0), and its masters grant
# nothing for their first 30 s (the restart rule), which its first acquire waits out.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${LOCKGATE_BENCH_OUT:-target/bench}/listing.md}
shift || true
mkdir -p "$(dirname "$out")"
cargo build --release -q -p lockgate-cli -p lockgate-conformance
launcher=${LOCKGATE_TEST_SERVERS:-target/release/test-servers}
rows=()
for kind in ${BENCH_KINDS:-single cluster redlock zookeeper etcd postgres mariadb}; do
  fifo=$(mktemp -u) && mkfifo "$fifo"
  # The launcher runs until its stdin closes: hold it open on fd 9, close it to stop exactly it.
  exec 9> >("$launcher" "$kind" > "$fifo")
  read -r line < "$fifo"
  rm -f "$fifo"
  url=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["url"])' "$line")
  counter=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
if d["kind"] in ("single", "redlock"): print("redis:" + ",".join("127.0.0.1:%d" % n["port"] for n in d["nodes"]))
elif d["kind"] == "etcd": print("etcd:" + d["endpoints"].split(",")[0])
' "$line")
  name=$(case $kind in single) echo "Redis";; cluster) echo "Redis Cluster";; redlock) echo "Redlock (3 masters; no queue: the holder alone)";; zookeeper) echo "ZooKeeper";; etcd) echo "etcd";; postgres) echo "PostgreSQL";; mariadb) echo "MariaDB";; esac)
  extra=()
  [ "$kind" = redlock ] && extra=(--waiters 0)
  if row=$(./target/release/lockgate-bench bench-listing --url "$url" --backend "$name" ${counter:+--counter "$counter"} "${extra[@]}" "$@"); then
    rows+=("$row")
  else
    rows+=("| $name | failed | | | | |")
  fi
  exec 9>&-
  sleep 1
done
{
  echo "## Operators: inspect and list (issue 25)"
  echo
  echo "Produced by \`scripts/bench_listing.sh\` (\`lockgate-bench bench-listing\`) on $(date -u +%Y-%m-%d) on a $(nproc)-core machine shared with other work, one server of each backend from the project's launcher on loopback. **Inspect**: one lock held by one client with 1,000 waiters of another client queued behind it, read by a third client; median of 5 reads. **List**: 10,000 mutexes held under one prefix, every page of 1,000 read to the end by another client; median of 3 walks. Requests: what the server counted per read or walk (Redis \`total_commands_processed\`, summed over a Redlock's masters, etcd \`grpc_server_msg_received_total\`); — where the server has no such counter here. A listing page is one bounded request plus one inspect read per lock found (PROTOCOL.md §16)."
  echo
  echo "| backend | inspect, 1,000 waiters (ms) | its requests | list, 10,000 locks (ms) | its requests | pages |"
  echo "|---|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} > "$out"
cat "$out"
