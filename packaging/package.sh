#!/usr/bin/env bash
# ./run package [--check] [PART...]: the prebuilt artifacts a user installs without a Rust
# toolchain, into dist/ (issue 28). PARTs (default: all, in this order):
#   versions  packaging/versions.sh check (one version for every artifact)
#   python    abi3 wheels (CPython >= 3.9) for manylinux_2_17 and musllinux_1_2, x86-64 and
#             aarch64 (maturin --zig), and Windows x86-64 (cargo-zigbuild, repacked), plus the
#             sdist; auditwheel show, readelf for musllinux, objdump for Windows (PY_TARGETS and
#             python_windows_wheel in packaging/lib.sh)
#   node      the npm tarball (wasm + ESM + CommonJS + types; drivers are optional peers)
#   jvm       one jar with the native library for linux-x86-64, linux-aarch64 and win32-x86-64,
#             its sources and javadoc jars and POM installed into dist/jvm/m2 (a Maven
#             repository), and the self-contained dist/jvm/lockgate-all-V.jar for `java -cp`
#   cli       the `lockgate` command, static for Linux x86-64 and aarch64 (musl, cargo zigbuild),
#             and lockgate.exe for Windows x86-64
#   docs      API references: rustdoc (lockgate-core), pdoc (Python), typedoc (TypeScript),
#             javadoc; warnings fail the build
#   sizes     dist/SIZES.md: every artifact's size, and a Redis-only native library beside the
#             one with every backend
# --host (./run test's packaging suite): the version check, then only the host's wheel, tarball
# and jar into $LOCKGATE_DIST, installed and run by packaging/check.sh host.
# --check then runs packaging/check.sh on what dist/ holds: the host's wheel, tarball and jar
# installed into clean directories with no cargo on PATH, the aarch64 ones under qemu-user, and
# the lockgate command's binaries, each taking a lock on a loopback server.
# Cross builds use cargo's per-target directories under target/ and run under `nice`.
set -euo pipefail
cd "$(dirname "$0")/.."
LG_ROOT=$PWD
source scripts/lib.sh
source packaging/lib.sh
trap cleanup EXIT

check=0
parts=()
for a in "$@"; do
  case $a in
    --check) check=1 ;;
    # ./run test's packaging suite: versions, the host's artifacts into $LOCKGATE_DIST, checked.
    --host) packaging/versions.sh check; package_host; bash packaging/check.sh host; exit ;;
    versions | python | node | jvm | cli | docs | sizes) parts+=("$a") ;;
    *) echo "usage: ./run package [--check] [versions|python|node|jvm|cli|docs|sizes]..." >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || parts=(versions python node jvm cli docs sizes)

started=$SECONDS
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
mkdir -p dist
for part in "${parts[@]}"; do
  t=$SECONDS
  log "package: $part"
  "package_$part"
  log "package: $part: $((SECONDS - t)) s"
done
if [ $check = 1 ]; then
  t=$SECONDS
  bash packaging/check.sh all
  log "package --check: $((SECONDS - t)) s"
fi
log "package: done in $((SECONDS - started)) s; dist/:"
find dist -maxdepth 2 -type f ! -path 'dist/docs/*' ! -path 'dist/jvm/m2/*' -printf '%10s  %p\n' | sort -k2 >&2
