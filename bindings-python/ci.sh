#!/usr/bin/env bash
# The Python binding's entry point for ./run and for people:
#   bindings-python/ci.sh install   install what the build, tests and benchmark need (idempotent)
#   bindings-python/ci.sh build     build the abi3 wheel (maturin leaves it in target/wheels/) and install it
#                                   (pip install ./bindings-python)
#   bindings-python/ci.sh test      build, then mypy.stubtest + pytest against real redis-servers,
#                                   ZooKeeper, PostgreSQL and MariaDB (started by target/release/test-servers,
#                                   built if missing)
#   bindings-python/ci.sh bench     build, then the benchmark vs redis-py and python-redis-lock
#                                   ($LOCKGATE_BENCH_OUT/python.md, default target/bench/) and the one vs
#                                   kazoo on ZooKeeper ($LOCKGATE_BENCH_OUT/python-zookeeper.md) and the one vs the
#                                   naive add/delete loop and tooz on memcached ($LOCKGATE_BENCH_OUT/python-memcached.md;
#                                   pymemcache and tooz are installed into target/memcached-peers, not the interpreter)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=${PYTHON:-python3}
# Python packages and the versions they must satisfy (checked before installing, to stay fast).
# psycopg and PyMySQL: the application's own connections in tests/test_sql_fence.py (psycopg 3.3
# is pure Python over the system's libpq, which Debian's postgresql brings).
PIP_PACKAGES=("maturin>=1.16,<2" "pytest>=7" "pytest-xdist>=3" "mypy>=1.10" "typing_extensions>=4.15" "redis>=5" "python-redis-lock>=4" "kazoo>=2.10" "opentelemetry-sdk>=1.20"
  "psycopg>=3.3,<3.4" "PyMySQL>=1.1,<2")

log() { printf '==> [python] %s\n' "$*" >&2; }

# Prints the requirements of PIP_PACKAGES that the interpreter does not satisfy yet.
missing_pip() {
  "$PY" - "${PIP_PACKAGES[@]}" <<'EOF'
import sys
from importlib import metadata
def parse(v):
    return tuple(int(p) for p in v.split("+")[0].split(".")[:3] if p.isdigit())
for req in sys.argv[1:]:
    name, _, spec = req.partition(">=")
    upper = None
    if "," in spec:
        spec, _, upper = spec.partition(",<")
    try:
        have = parse(metadata.version(name))
    except metadata.PackageNotFoundError:
        print(req); continue
    if have < parse(spec) or (upper and have >= parse(upper)):
        print(req)
EOF
}

cmd_install() {
  if ! command -v redis-server >/dev/null 2>&1; then
    log "installing redis-server"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
  fi
  if [ ! -f /usr/share/java/zookeeper.jar ]; then
    # Debian's ZooKeeper 3.8, for the kazoo interop tests and benchmark (the launcher runs its jar).
    log "installing zookeeper"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
  fi
  if [ ! -x /usr/lib/postgresql/15/bin/postgres ] || [ ! -x /usr/sbin/mariadbd ]; then
    # Debian's PostgreSQL 15 and MariaDB 10.11 (the launcher runs its own servers, no service).
    log "installing postgresql and mariadb-server"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql mariadb-server >/dev/null
  fi
  if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    # Debian's python3 makes virtualenvs only with python3-venv (tests/test_fresh_venv.py).
    log "installing python3-venv"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] ||
    { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
  local missing
  missing=$(missing_pip)
  if [ -n "$missing" ]; then
    log "pip install $(echo $missing)"
    # shellcheck disable=SC2086
    "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore $missing
  fi
}

# Builds and installs the package the way a user does (`pip install ./bindings-python`: maturin
# as the PEP 517 backend), reusing the installed maturin and the workspace's target dir.
cmd_build() {
  command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
  log "pip install ./bindings-python"
  (cd "$ROOT" && "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-build-isolation \
    --no-deps --force-reinstall ./bindings-python)
}

cmd_test() {
  cmd_build
  export MYPY_CACHE_DIR="$ROOT/target/mypy-cache"  # keep the source tree clean
  cd "$HERE/tests"  # not from the source tree: test the installed package
  log "stubtest: the .pyi stubs against the compiled module"
  "$PY" -m mypy.stubtest lockgate --concise
  "$PY" -m mypy --strict "$HERE/tests/typing_check.py" "$HERE/python/lockgate/otel.py"
  if [ -z "${LOCKGATE_TEST_SERVERS:-}" ]; then
    log "the project's test-server launcher (target/release/test-servers)"
    (cd "$ROOT" && cargo build --release -q -p lockgate-conformance)
  fi
  log "pytest (real redis-servers from the launcher)"
  # Four workers (pytest-xdist): the tests mostly wait on their servers, each worker starts its own.
  "$PY" -m pytest -p no:cacheprovider -q -n 4 "$HERE/tests"
}

cmd_bench() {
  cmd_build
  local out=${LOCKGATE_BENCH_OUT:-$ROOT/target/bench}
  mkdir -p "$out"
  cd "$HERE/tests"
  "$PY" "$HERE/bench/bench.py" --out "$out/python.md" "$@"
  log "wrote $out/python.md"
  if [ -z "${LOCKGATE_TEST_SERVERS:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p lockgate-conformance)
  fi
  "$PY" "$HERE/bench/bench_zookeeper.py" --out "$out/python-zookeeper.md"
  log "wrote $out/python-zookeeper.md"
  # The memcached peers (tooz brings the oslo libraries): kept out of the interpreter's packages.
  local peers=$ROOT/target/memcached-peers peer_reqs="pymemcache==4.0.0 tooz==9.1.0"
  if [ "$(cat "$peers/.requirements" 2>/dev/null)" != "$peer_reqs" ]; then
    # shellcheck disable=SC2086
    "$PY" -m pip install -q --disable-pip-version-check --target "$peers" $peer_reqs
    echo "$peer_reqs" > "$peers/.requirements"
  fi
  PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$peers" "$PY" "$HERE/bench/bench_memcached.py" --out "$out/python-memcached.md"
  log "wrote $out/python-memcached.md"
}

case "${1:-}" in
  install) cmd_install ;;
  build) cmd_build ;;
  test) cmd_test ;;
  bench) shift; cmd_bench "$@" ;;
  *) echo "usage: bindings-python/ci.sh install | build | test | bench" >&2; exit 2 ;;
esac
