# Shared shell helpers for ./run: idempotent installs and loopback servers stopped by pid.
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

ensure_base() {
  ensure_apt redis-server redis-tools openssl python3 ca-certificates
  ensure_rust
}

# A loopback port nothing listens on now, below the kernel's ephemeral range (why: see bindings-python/tests/ports.py).
free_port() {
  python3 "$LG_ROOT/bindings-python/tests/ports.py"
}

# Starts a throwaway redis-server on a free loopback port and sets REDIS_PORT (a server that
# exits at once lost its port to another process: it is started again on a new one). Call it
# directly, not in $(...): the pid must be recorded in this shell for cleanup to stop the server.
redis_start() {
  local port dir
  for _ in 1 2 3 4 5; do
    port=$(free_port)
    dir="$LG_TMP/redis-$port"
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
      --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" "$@" >/dev/null
    for _ in $(seq 1 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && break
      sleep 0.05
    done
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      LG_PIDS+=("$(cat "$dir/redis.pid")")
      REDIS_PORT=$port
      return 0
    fi
    [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null
    log "redis-server did not start on port $port: $(tail -n 2 "$dir/redis.log" 2>/dev/null | tr '\n' ' ')"
  done
  return 1
}

# Stops every server this run started, by pid, and removes the temp dir.
cleanup() {
  for pid in "${LG_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  rm -rf "$LG_TMP"
}
