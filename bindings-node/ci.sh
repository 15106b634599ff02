#!/usr/bin/env bash
# The Node binding's CI entry point (called by ../run):
#   ci.sh install   rustup target, wasm-bindgen-cli at the pinned version, npm deps (npm ci); idempotent
#   ci.sh build     the engine for wasm32 + wasm-bindgen --target nodejs into bindings-node/pkg/
#   ci.sh test      build, then: tsc on the typed example, the engine cases natively and under
#                   wasm32 (must agree), and `node --test` against redis-servers (and a ZooKeeper) the tests start
#                   through the project's launcher (target/release/test-servers, built here)
#   ci.sh bench     lockgate vs redlock vs redis-semaphore on one redis-server it starts;
#                   writes $LOCKGATE_BENCH_OUT/node.md (default target/bench/node.md)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# Must equal the `wasm-bindgen = "=..."` pin in Cargo.toml: the CLI and the crate share a format.
WASM_BINDGEN_VERSION=0.2.130
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WASM=$TARGET_DIR/wasm32-unknown-unknown/release/lockgate_node.wasm

log() { printf '==> [bindings-node] %s\n' "$*" >&2; }

ensure_path() {
  if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$PATH:$HOME/.cargo/bin" ;; esac
  command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup" >&2; exit 1; }
  command -v node >/dev/null || { echo "node not found: install Node.js >= 18.18" >&2; exit 1; }
}

wasm_bindgen_matches() {
  [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" = "$WASM_BINDGEN_VERSION" ] &&
    command -v wasm-bindgen-test-runner >/dev/null 2>&1
}

cmd_install() {
  ensure_path
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    log "rustup target add wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
  fi
  if wasm_bindgen_matches; then
    log "wasm-bindgen-cli $WASM_BINDGEN_VERSION already installed"
  else
    log "cargo install wasm-bindgen-cli --version $WASM_BINDGEN_VERSION (a few minutes)"
    # No --locked: it fails for this version (see /work/shared/TOOLCHAIN.md).
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
  fi
  if ! command -v redis-server >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      local sudo=""
      [ "$(id -u)" -ne 0 ] && sudo="sudo"
      log "installing redis-server (the tests and the benchmark start their own)"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
    else
      log "WARNING: redis-server is missing; the tests will fail loudly without it"
    fi
  fi
  if [ ! -f /usr/share/java/zookeeper.jar ]; then
    if command -v apt-get >/dev/null 2>&1; then
      local sudo=""
      [ "$(id -u)" -ne 0 ] && sudo="sudo"
      log "installing zookeeper (test/zookeeper.test.js starts its own through the launcher)"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper default-jre-headless >/dev/null
    else
      log "WARNING: Debian's zookeeper is missing; test/zookeeper.test.js will fail loudly without it"
    fi
  fi
  if [ ! -x /usr/lib/postgresql/15/bin/postgres ] || ! command -v mariadbd >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      local sudo=""
      [ "$(id -u)" -ne 0 ] && sudo="sudo"
      log "installing postgresql and mariadb-server (test/sql*.test.js start their own through the launcher)"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql pgbouncer mariadb-server >/dev/null
    else
      log "WARNING: postgresql or mariadb-server is missing; test/sql*.test.js will fail loudly without them"
    fi
  fi
  log "npm ci"
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
}

cmd_build() {
  ensure_path
  log "cargo build -p lockgate-node --target wasm32-unknown-unknown --release"
  (cd "$ROOT" && cargo build -p lockgate-node --target wasm32-unknown-unknown --release)
  wasm_bindgen_matches || { echo "wasm-bindgen $WASM_BINDGEN_VERSION is not installed: run $0 install" >&2; exit 1; }
  log "wasm-bindgen --target nodejs --out-dir bindings-node/pkg"
  rm -rf "$HERE/pkg"
  wasm-bindgen --target nodejs --out-dir "$HERE/pkg" "$WASM"
  transport_types
}

# lib/transport/types.d.ts: every transport's types (lib/transport/<name>.d.ts), which add their
# URL forms, options and connect() overloads to lib/index.d.ts's; listed from the folder, so a
# new backend's types are found without a line in a shared file.
transport_types() {
  local out="$HERE/lib/transport/types.d.ts" f name
  {
    echo "// Written by bindings-node/ci.sh build from lib/transport/*.d.ts: do not edit."
    for f in "$HERE"/lib/transport/*.d.ts; do
      name=$(basename "$f" .d.ts)
      [ "$name" = types ] || echo "export * from './$name';"
    done
  } > "$out"
}

# Runs every step even after a failure; the exit status says whether all passed.
FAILED=()
step() {
  local name=$1
  shift
  log "$name"
  if ! "$@"; then FAILED+=("$name"); fi
}

engine_cases() {
  local digests="$TARGET_DIR/tmp/lockgate-node-engine-digests.txt"
  rm -f "$digests"
  (cd "$ROOT" && cargo test -p lockgate-node --release --test engine_cases) || return 1
  (cd "$ROOT" &&
    LOCKGATE_NATIVE_DIGESTS="$digests" \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test -p lockgate-node --release --test engine_cases --target wasm32-unknown-unknown)
}

# The project's one test-server launcher (conformance/README.md), which the tests and the
# benchmark start their redis-servers with.
build_launcher() {
  log "cargo build --release -p lockgate-conformance --bin test-servers"
  (cd "$ROOT" && cargo build --release -p lockgate-conformance --bin test-servers)
}

cmd_test() {
  cmd_build
  build_launcher
  cd "$HERE"
  [ -d node_modules/ioredis ] || { echo "npm dependencies missing: run $0 install" >&2; exit 1; }
  step "tsc --noEmit on the typed example (test/types)" npx --no-install tsc -p test/types --noEmit
  step "engine cases: native, then wasm32 under Node (wasm-bindgen-test-runner)" engine_cases
  # Four files at a time (Node's default is one per core less one: one file at a time here): the
  # tests mostly wait on their servers, and each file starts its own, so they do not meet.
  step "node --test (real servers from the launcher)" node --test --test-concurrency=4 --test-reporter=spec test/*.test.js
  echo
  if [ ${#FAILED[@]} -eq 0 ]; then
    log "bindings-node: all test steps passed"
  else
    log "bindings-node: FAILED steps: ${FAILED[*]}"
    exit 1
  fi
}

cmd_bench() {
  ensure_path
  [ -f "$HERE/pkg/lockgate_node_bg.wasm" ] || cmd_build
  build_launcher
  cd "$HERE"
  local out_dir=${LOCKGATE_BENCH_OUT:-$ROOT/target/bench}
  mkdir -p "$out_dir"
  node bench/bench.js --out "$out_dir/node.md" "$@"
}

case "${1:-}" in
  install) cmd_install ;;
  build) cmd_build ;;
  test) cmd_test ;;
  bench) shift; cmd_bench "$@" ;;
  *)
    echo "usage: $0 install|build|test|bench" >&2
    exit 2
    ;;
esac
