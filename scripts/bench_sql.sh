#!/usr/bin/env bash
# Issue 17's SQL benchmark: on PostgreSQL 15 and MariaDB, in one run on the same servers,
# lockgate's native SQL mutex against the naive insert-and-retry table lock (seed 004, written
# in the bench itself) and the most used peer library for each database: npm `advisory-lock`
# (Node) on PostgreSQL, PyPI `PyMySQLLock` (Python) on MariaDB (bench/sql-peers).
# Writes one markdown section to $1, else $LOCKGATE_BENCH_OUT/sql.md, else target/bench/sql.md.
# Needs Debian's postgresql and mariadb-server (scripts/lib.sh installs them), node/npm and
# python3 (the peers are installed here, idempotently: npm into bench/sql-peers/node_modules,
# pip into the venv target/sql-peers-venv). Extra arguments go to lockgate-bench bench-sql
# (--seconds S per contended run, --pairs P per uncontended round, --rounds R, --runs N,
# --libs lockgate,naive,peer,binding).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${LOCKGATE_BENCH_OUT:-target/bench}/sql.md}
shift || true
mkdir -p "$(dirname "$out")"
cargo build --release -q -p lockgate-cli -p lockgate-conformance
peers=bench/sql-peers
# The peers, installed only when missing or when their pinned versions changed.
if ! cmp -s "$peers/package.json" "$peers/node_modules/.bench-sql-package.json" 2>/dev/null; then
  (cd "$peers" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$peers/package.json" "$peers/node_modules/.bench-sql-package.json"
fi
venv=target/sql-peers-venv
if ! cmp -s "$peers/requirements.txt" "$venv/.bench-sql-requirements.txt" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$peers/requirements.txt"
  cp "$peers/requirements.txt" "$venv/.bench-sql-requirements.txt"
fi
# lockgate's own Node and Python rows use the bindings as their ci.sh builds them (bindings-node/pkg;
# the Python that bindings-python/ci.sh installs into, $PYTHON else python3); a binding not built
# (or without SQL) is left out of the section with its error.
./target/release/lockgate-bench bench-sql --node node --python "$venv/bin/python" --binding-python "${PYTHON:-python3}" \
  --peers "$peers" --out "$out" \
  --command "scripts/bench_sql.sh (lockgate-bench bench-sql --node node --python $venv/bin/python --peers $peers)" "$@"
