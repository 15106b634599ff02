# Shared shell helpers for ./run: idempotent installs and loopback servers stopped by pid
# (through the one test-server launcher, test-servers).
# Sourced, not executed.

LG_ROOT=${LG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
LG_TMP=${LG_TMP:-$(mktemp -d "${TMPDIR:-/tmp}/lockgate-run.XXXXXX")}
export LOCKGATE_TMP=$LG_TMP
LG_PIDS=()
LG_APT_UPDATED=0

log() { printf '==> %s\n' "$*" >&2; }

# Installs Debian packages that are not installed yet (one apt-get update per run, at most).
ensure_apt() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if [ "$LG_APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    $sudo apt-get update -qq
    LG_APT_UPDATED=1
  fi
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The Rust toolchain comes from rustup (preinstalled on the project's machines).
ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  fi
  command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
}

ensure_wasm_target() {
  rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown
}

# Says so up front when the build directory's disk has less than $1 GB free: a full test
# build needs about 6 GB, and running out shows up later as unrelated-looking failures.
warn_low_disk() {
  local free_kb
  free_kb=$(df -Pk "${CARGO_TARGET_DIR:-$LG_ROOT}" 2>/dev/null | awk 'NR==2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $(($1 * 1024 * 1024)) ]; then
    log "warning: only $((free_kb / 1024)) MB free on the build disk; the test build needs about $1 GB"
  fi
}

ensure_base() {
  ensure_apt redis-server redis-tools openssl python3 ca-certificates
  ensure_zookeeper
  ensure_etcd
  ensure_postgres
  ensure_mariadb
  ensure_memcached
  ensure_go
  ensure_rust
}

# Debian's ZooKeeper (the server jar and its libraries; it pulls in a Java runtime). No service
# is started: the launcher (test-servers zookeeper) runs its own members on free loopback ports.
ensure_zookeeper() {
  ensure_apt zookeeper default-jre-headless
}

# Debian's etcd 3.4 (server and etcdctl) and what the etcd-client crate needs at build time
# (protoc and protobuf's well-known .proto files). No service is started: the launcher
# (test-servers etcd) runs its own members on free loopback ports.
ensure_etcd() {
  ensure_apt etcd-server etcd-client protobuf-compiler libprotobuf-dev
}

# Debian's PostgreSQL 15 (server binaries under /usr/lib/postgresql/15/bin, and psql), PgBouncer
# 1.18 (/usr/sbin/pgbouncer, for `test-servers postgres --pgbouncer MODE`) and MariaDB 10.11
# (mariadbd, mariadb-install-db, the mariadb client). Installing them starts no service here
# (policy-rc.d denies it); where a package's own service does start, nothing uses it: the
# launcher (test-servers postgres / mariadb) runs its own servers and pgbouncers, as the
# postgres and mysql users, on free loopback ports with data in temp dirs.
ensure_postgres() {
  ensure_apt postgresql postgresql-client pgbouncer
  if [ -z "${LOCKGATE_PG_BIN:-}" ] && [ ! -x /usr/lib/postgresql/15/bin/postgres ]; then
    echo "PostgreSQL 15 is not under /usr/lib/postgresql/15/bin: set LOCKGATE_PG_BIN to its bin dir" >&2
    return 1
  fi
}

ensure_mariadb() {
  ensure_apt mariadb-server mariadb-client
}

# Debian's memcached 1.6 (/usr/bin/memcached). Installing it starts no service here (policy-rc.d
# denies it); where its own service does start, nothing uses it: the launcher (test-servers
# memcached) runs its own servers on free loopback ports, stopped by pid.
ensure_memcached() {
  ensure_apt memcached
}

# Go, for etcd's own concurrency package as an interop and benchmark peer (bench/etcd-go, built
# by core/tests/etcd_interop.rs and scripts/bench_etcd.sh through the Go module proxy). The
# project's machines have Go under /usr/local/go; elsewhere Debian's golang-go fetches the
# toolchain bench/etcd-go/go.mod asks for (GOTOOLCHAIN=auto, through the same proxy).
ensure_go() {
  if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then
      export PATH="/usr/local/go/bin:$PATH"
    else
      ensure_apt golang-go
      export GOTOOLCHAIN=auto
    fi
  fi
}

# The one test-server launcher (conformance/src/bin/servers.rs, documented in
# conformance/README.md), shared with every language's tests and the conformance orchestrator.
LG_TEST_SERVERS=${LOCKGATE_TEST_SERVERS:-$LG_ROOT/target/release/test-servers}

# Starts `test-servers KIND [ARGS...]` (single, acl, replica, cluster, redlock, proxied, zookeeper, etcd) in the
# background and sets SERVERS_JSON to the one JSON line it prints (URLs, ports, pids). Its pid
# goes to LG_PIDS: cleanup's kill (SIGTERM) makes it stop exactly the servers it started. Call
# it directly, not in $(...), so the pid is recorded in this shell.
servers_start() {
  [ -x "$LG_TEST_SERVERS" ] || cargo build --release -q -p lockgate-conformance
  local fifo out pid fd
  fifo=$(mktemp -u "$LG_TMP/servers.XXXXXX")
  out="$fifo.json"
  mkfifo "$fifo"
  "$LG_TEST_SERVERS" "$@" < "$fifo" > "$out" &
  pid=$!
  LG_PIDS+=("$pid")
  # Hold the launcher's stdin open: it runs until its stdin closes or it gets SIGTERM.
  exec {fd}> "$fifo"
  for _ in $(seq 1 1200); do
    if [ "$(wc -l < "$out")" -ge 1 ]; then
      SERVERS_JSON=$(head -n 1 "$out")
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  log "test-servers $* did not start"
  return 1
}

# Starts a throwaway redis-server (test-servers single; extra arguments go to redis-server) and
# sets REDIS_PORT. Call it directly, not in $(...).
redis_start() {
  servers_start single -- "$@" || return 1
  REDIS_PORT=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["nodes"][0]["port"])' "$SERVERS_JSON")
}

# The core's API reference (into target/doc), as users read it: a public item without a doc
# comment, a broken intra-doc link or any other rustdoc warning fails it. `./run test` builds it
# so that `./run package docs` does not find such a break at release time.
rustdoc_core() {
  RUSTDOCFLAGS="-D warnings -D missing_docs" cargo doc -q -p lockgate-core --no-deps
}

# Stops every server this run started, by pid, and removes the temp dir.
cleanup() {
  for pid in "${LG_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  # The launchers are this shell's children: let them stop their servers before the dir goes.
  for pid in "${LG_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$LG_TMP"
}
