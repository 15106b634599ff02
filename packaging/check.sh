#!/usr/bin/env bash
# Installs what `./run package` put in dist/ the way a user does, from clean temp directories,
# with no Rust toolchain on PATH, and takes a lock with each on a real loopback redis-server
# from the project's launcher (one server for every check), checking the fencing token.
#   packaging/check.sh host      the host's artifacts: the wheel into a new venv, the npm
#                                tarball (+ ioredis, its one driver) into a new npm project, the
#                                jar from dist/jvm/m2 into a new Maven project (one <dependency>,
#                                offline) and lockgate-all.jar with plain `java -cp`
#   packaging/check.sh foreign   the aarch64 wheel, jar and lockgate command under qemu-user
#                                (Debian's arm64 python3 and JRE unpacked into
#                                target/packaging/arm64/, not installed), and the jar's Windows
#                                library loaded under Debian's wine64
#   packaging/check.sh all       both, and the lockgate command's binaries: `lockgate run` on
#                                x86-64, on aarch64 under qemu-user, and lockgate.exe under wine64
#                                (./run package --check)
set -euo pipefail
cd "$(dirname "$0")/.."
LG_ROOT=$PWD
source scripts/lib.sh
source packaging/lib.sh
trap cleanup EXIT

VERSION=$(packaging/versions.sh print)
CHECKED=()
# PATH for the installs: the system's tools only (no ~/.cargo/bin, no pyenv).
CLEAN_PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin

fail() { echo "check: $*" >&2; exit 1; }

start_server() {
  [ -n "${REDIS_URL:-}" ] && return 0
  redis_start
  REDIS_URL=redis://127.0.0.1:$REDIS_PORT
  log "check: redis-server on $REDIS_URL (test-servers single)"
}

# A fencing token line `token N` (N > 0) in $1, else fail with $2.
expect_token() {
  grep -qE '^token [1-9][0-9]*$' <<<"$1" || fail "$2 printed no fencing token:"$'\n'"$1"
  CHECKED+=("$2: $(grep -E '^token' <<<"$1" | head -1)")
  log "check: $2: ok ($(grep -E '^token' <<<"$1" | head -1))"
}

# The Python program every wheel check runs: a lock, its fencing token, released.
PY_PROGRAM='
import sys, lockgate
with lockgate.Client(sys.argv[1]) as client:
    with client.lock("packaging-check").acquire(timeout=10) as lease:
        assert isinstance(lease.fencing_token, int) and lease.fencing_token > 0
        print("token", lease.fencing_token)
'

check_python_host() {
  local wheel dir out
  wheel=$(host_wheel)
  dir=$(mktemp -d "$LG_TMP/python.XXXXXX")
  env -i PATH=$CLEAN_PATH HOME="$dir" bash -c '! command -v cargo' || fail "cargo is on the clean PATH"
  env -i PATH=$CLEAN_PATH HOME="$dir" python3 -m venv "$dir/venv"
  # --no-index: the wheel alone, nothing from a registry and nothing to compile.
  env -i PATH=$CLEAN_PATH HOME="$dir" "$dir/venv/bin/pip" install -q --no-index --disable-pip-version-check "$wheel" >&2
  out=$(cd "$dir" && env -i PATH=$CLEAN_PATH HOME="$dir" "$dir/venv/bin/python" -c "$PY_PROGRAM" "$REDIS_URL")
  expect_token "$out" "python: $(basename "$wheel") in a new venv ($(env -i PATH=$CLEAN_PATH python3 --version))"
}

check_node_host() {
  local tgz=$DIST/node/lockgate-$VERSION.tgz dir out
  [ -f "$tgz" ] || fail "$tgz is missing: ./run package node"
  dir=$(mktemp -d "$LG_TMP/node.XXXXXX")
  echo '{ "name": "app", "private": true }' > "$dir/package.json"
  (cd "$dir" && env PATH="$CLEAN_PATH" npm install --silent --no-audit --no-fund --prefer-offline "$tgz" ioredis >&2)
  [ ! -e "$dir/node_modules/pg" ] || fail "npm install of the tarball pulled pg (drivers are optional peers)"
  cat > "$dir/app.mjs" <<'EOF'
import { connect } from 'lockgate';
const client = await connect(process.argv[2]);
await client.lock('packaging-check').using(async (lease) => {
  if (typeof lease.fencingToken !== 'bigint' || lease.fencingToken <= 0n) throw new Error('no fencing token');
  console.log('token', String(lease.fencingToken));
});
await client.close();
EOF
  out=$(cd "$dir" && env PATH="$CLEAN_PATH" node app.mjs "$REDIS_URL")
  expect_token "$out" "node: lockgate-$VERSION.tgz + ioredis in a new npm project"
}

# The Java program of the JVM checks (compiled by the Maven project, or by javac for java -cp).
write_java_main() {
  mkdir -p "$1"
  cat > "$1/Main.java" <<'EOF'
import io.lockgate.*;
import java.time.Duration;

public class Main {
    public static void main(String[] args) throws Exception {
        try (LockgateClient client = LockgateClient.connect(args[0]);
             Lease lease = client.getLock("packaging-check").acquire(Duration.ofSeconds(10))) {
            long token = lease.fencingToken().getAsLong();
            if (token <= 0) throw new IllegalStateException("no fencing token");
            System.out.println("token " + token);
        }
    }
}
EOF
}

check_jvm_host() {
  local repo=$DIST/jvm/m2 dir out
  [ -d "$repo/io/lockgate/lockgate/$VERSION" ] || fail "$repo has no io.lockgate:lockgate:$VERSION: ./run package jvm"
  dir=$(mktemp -d "$LG_TMP/maven.XXXXXX")
  write_java_main "$dir/src/main/java"
  # A user's pom: one <dependency>, resolved from dist/jvm/m2. Everything else (kotlin-stdlib,
  # coroutines, JNA, slf4j, the plugins) comes from the warm ~/.m2, read as a file repository
  # into this project's own local repository, so neither ~/.m2 nor dist/ is written to; -o keeps
  # Maven off the network (file:// only).
  cat > "$dir/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>app</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <repositories>
    <repository><id>lockgate-dist</id><url>file://$repo</url></repository>
    <repository><id>warm-m2</id><url>file://$HOME/.m2/repository</url></repository>
  </repositories>
  <pluginRepositories>
    <pluginRepository><id>warm-m2</id><url>file://$HOME/.m2/repository</url></pluginRepository>
  </pluginRepositories>
  <dependencies>
    <dependency>
      <groupId>io.lockgate</groupId>
      <artifactId>lockgate</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
      <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
      <plugin><groupId>org.codehaus.mojo</groupId><artifactId>exec-maven-plugin</artifactId><version>3.5.0</version></plugin>
    </plugins>
  </build>
</project>
EOF
  out=$(cd "$dir" && mvn -o -B -q -Dstyle.color=never -Daether.offline.protocols=file -Dmaven.repo.local="$dir/repo" \
    compile exec:java -Dexec.mainClass=Main -Dexec.args="$REDIS_URL" 2>&1 | sed 's/\x1b\[[0-9;]*m//g') ||
    fail "the Maven project did not build or run:"$'\n'"$out"
  [ -f "$dir/repo/io/lockgate/lockgate/$VERSION/lockgate-$VERSION.jar" ] || fail "io.lockgate:lockgate did not come from dist/jvm/m2"
  expect_token "$out" "jvm: io.lockgate:lockgate:$VERSION from dist/jvm/m2 in a new Maven project (mvn -o)"

  local all=$DIST/jvm/lockgate-all-$VERSION.jar
  mkdir -p "$dir/plain"
  javac -d "$dir/plain" -cp "$all" "$dir/src/main/java/Main.java"
  out=$(java -cp "$all:$dir/plain" Main "$REDIS_URL")
  expect_token "$out" "jvm: java -cp lockgate-all-$VERSION.jar ($(java -version 2>&1 | head -1))"
}


# ---- foreign architectures ----

# Debian's arm64 packages $2... (and what they depend on) unpacked into target/packaging/arm64/$1
# — not installed: the host's own packages stay as they are. qemu-aarch64 -L runs from there.
arm64_root() {
  local name=$1 root=$PKG_WORK/arm64/$1
  shift
  ARM64_ROOT=$root
  [ -f "$root/.done" ] && [ "$(cat "$root/.done")" = "$*" ] && return 0
  ensure_apt qemu-user
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "check: dpkg --add-architecture arm64"
    dpkg --add-architecture arm64
    LG_APT_UPDATED=0
  fi
  if ! apt-cache show "$1" >/dev/null 2>&1; then
    apt-get update -qq
  fi
  local debs=$PKG_WORK/arm64/debs pkgs
  mkdir -p "$debs"
  pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$@" 2>/dev/null | grep -E '^[a-z0-9][^ ]*:arm64$' |
    grep -vE '^(dpkg|tar|perl-base|bash|coreutils|debconf|install-info|libpam[^:]*|util-linux|passwd|adduser):' | sort -u)
  log "check: unpacking $(wc -w <<<"$pkgs") arm64 packages for $name"
  # shellcheck disable=SC2086
  (cd "$debs" && apt-get download -qq $pkgs >&2)
  rm -rf "$root" && mkdir -p "$root"
  local p deb
  for p in $pkgs; do
    deb=$(ls "$debs/${p%:arm64}"_*_arm64.deb 2>/dev/null | head -1)
    [ -n "$deb" ] && dpkg -x "$deb" "$root"
  done
  echo "$*" > "$root/.done"
}

check_python_aarch64() {
  local wheel dir out
  wheel=$(ls "$DIST"/python/lockgate-"$VERSION"-cp39-abi3-manylinux*_aarch64.whl | head -1)
  [ -f "$wheel" ] || fail "no aarch64 manylinux wheel in dist/python"
  arm64_root python python3.11-minimal:arm64 libpython3.11-stdlib:arm64
  dir=$(mktemp -d "$LG_TMP/py-arm64.XXXXXX")
  # The wheel's files as pip lays them out (a wheel is a zip of the installed tree).
  unzip -q "$wheel" -d "$dir/site"
  file -b "$dir"/site/lockgate/_lockgate*.so | grep -q 'ARM aarch64' || fail "the aarch64 wheel's extension is not aarch64"
  out=$(cd "$dir" && env -i PATH=$CLEAN_PATH PYTHONPATH="$dir/site" QEMU_LD_PREFIX="$ARM64_ROOT" \
    qemu-aarch64 "$ARM64_ROOT/usr/bin/python3.11" -c "import platform; print('machine', platform.machine())
$PY_PROGRAM" "$REDIS_URL")
  grep -qx 'machine aarch64' <<<"$out" || fail "python under qemu did not run as aarch64: $out"
  expect_token "$out" "python: $(basename "$wheel") under qemu-aarch64 (Debian arm64 python3.11)"
}

check_jvm_aarch64() {
  local all=$DIST/jvm/lockgate-all-$VERSION.jar dir out java
  arm64_root jre openjdk-17-jre-headless:arm64
  java=$ARM64_ROOT/usr/lib/jvm/java-17-openjdk-arm64/bin/java
  [ -x "$java" ] || fail "no arm64 java in $ARM64_ROOT"
  dir=$(mktemp -d "$LG_TMP/jvm-arm64.XXXXXX")
  write_java_main "$dir/src"
  javac --release 17 -d "$dir/classes" -cp "$all" "$dir/src/Main.java"
  out=$(env -i PATH=$CLEAN_PATH QEMU_LD_PREFIX="$ARM64_ROOT" qemu-aarch64 "$java" -Xshare:off -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dos.arch.check=1 -cp "$all:$dir/classes" Main "$REDIS_URL" 2>&1) || fail "java under qemu-aarch64 failed:"$'\n'"$out"
  expect_token "$out" "jvm: java -cp lockgate-all-$VERSION.jar under qemu-aarch64 (Debian arm64 openjdk-17-jre-headless; linux-aarch64/liblockgate_jvm.so)"
}

# The jar's win32-x86-64 library under Debian's wine: packaging/dllcheck.c (built by zig's cc)
# loads it with LoadLibrary, as JNA does, and calls its uniffi contract-version and `connect`
# checksum exports, which must equal the linux-x86-64 library's (read through ctypes). No lock:
# that needs a Windows JVM (or Python), which no Debian package provides.
check_jvm_win64() {
  local jar=$DIST/jvm/lockgate-$VERSION.jar dir out want
  [ -f "$jar" ] || fail "$jar is missing: ./run package jvm"
  ensure_apt wine64
  [ -x "$PKG_TOOLS/bin/python-zig" ] || ensure_pkg_tools
  dir=$(mktemp -d "$LG_TMP/win64.XXXXXX")
  (cd "$dir" && unzip -q "$jar" 'win32-x86-64/*' 'linux-x86-64/*')
  file -b "$dir/win32-x86-64/lockgate_jvm.dll" | grep -q 'PE32+ executable (DLL).*x86-64' ||
    fail "the jar's win32-x86-64/lockgate_jvm.dll is not an x86-64 DLL"
  "$PKG_TOOLS/bin/python-zig" cc -target x86_64-windows-gnu -O2 -o "$dir/dllcheck.exe" packaging/dllcheck.c
  # Beside the exe (searched first for a DLL's imports): what wine 8.0 lacks, for this check only.
  "$PKG_TOOLS/bin/python-zig" cc -target x86_64-windows-gnu -O2 -shared -o "$dir/bcryptprimitives.dll" \
    packaging/wine-bcryptprimitives.c -ladvapi32
  want=$(python3 -c 'import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.uniffi_lockgate_jvm_checksum_func_connect.restype = ctypes.c_uint16
print("loaded contract_version", lib.ffi_lockgate_jvm_uniffi_contract_version(), "connect_checksum", lib.uniffi_lockgate_jvm_checksum_func_connect())' \
    "$dir/linux-x86-64/liblockgate_jvm.so")
  # A prefix of its own under target/ (made on first use), not ~/.wine.
  out=$(cd "$dir" && WINEPREFIX=$PKG_WORK/wine WINEDEBUG=-all /usr/lib/wine/wine64 dllcheck.exe 'win32-x86-64\lockgate_jvm.dll' 2>&1 | tr -d '\r' | grep -v '^wine: ') ||
    fail "dllcheck.exe under wine: $out"
  [ "$out" = "$want" ] || fail "the win32-x86-64 library under wine said '$out', the linux-x86-64 one '$want'"
  CHECKED+=("jvm: win32-x86-64/lockgate_jvm.dll from lockgate-$VERSION.jar loaded under wine64 (LoadLibrary; $out, as linux-x86-64): no lock taken")
  log "check: jvm: win32-x86-64 library loads under wine ($out)"
}

# ---- the lockgate command ----

# `lockgate run` of a job that prints its fencing token, from a clean directory with a bare
# environment; $@ is how to start the binary (itself, or qemu-aarch64 and it).
run_cli() {
  local dir
  dir=$(mktemp -d "$LG_TMP/cli.XXXXXX")
  (cd "$dir" && env -i PATH=$CLEAN_PATH LOCKGATE_URL="$REDIS_URL" "$@" run packaging-check --wait 10s -- \
    /bin/sh -c 'echo "token $LOCKGATE_FENCING_TOKEN"')
}

check_cli_x86_64() {
  local bin=$DIST/cli/lockgate-$VERSION-x86_64-linux out
  [ -x "$bin" ] || fail "$bin is missing: ./run package cli"
  local deps
  deps=$(ldd "$bin" 2>&1 || true) # ldd exits 1 on a static binary
  grep -qE 'not a dynamic executable|statically linked' <<<"$deps" || fail "$bin is dynamic: $deps"
  out=$(run_cli "$bin")
  expect_token "$out" "cli: $(basename "$bin") (ldd: $(xargs <<<"$deps")) lockgate run"
}

# `lockgate run` starts its watchdog by executing itself, which qemu-user cannot do without
# binfmt_misc (not mounted in this container): so the x86-64 binary holds the lock, and its job
# runs the aarch64 binary's `inspect --json` under qemu-aarch64, which must show that holder's
# fencing token.
check_cli_aarch64() {
  local bin=$DIST/cli/lockgate-$VERSION-aarch64-linux host=$DIST/cli/lockgate-$VERSION-x86_64-linux out token
  [ -x "$bin" ] && [ -x "$host" ] || fail "$bin or $host is missing: ./run package cli"
  ensure_apt qemu-user
  file -b "$bin" | grep -q 'ARM aarch64' || fail "$bin is not aarch64"
  # No QEMU_LD_PREFIX: a static binary needs no arm64 libraries at all.
  out=$(env -i PATH=$CLEAN_PATH LOCKGATE_URL="$REDIS_URL" ARM_BIN="$bin" "$host" run packaging-check-aarch64 --wait 10s -- \
    /bin/sh -c 'qemu-aarch64 "$ARM_BIN" inspect packaging-check-aarch64 --json && echo "token $LOCKGATE_FENCING_TOKEN"') ||
    fail "lockgate inspect under qemu-aarch64 failed: $out"
  token=$(grep -E '^token ' <<<"$out" | awk '{print $2}')
  grep -v '^token ' <<<"$out" | python3 -c 'import json, sys
snap = json.load(sys.stdin)
assert snap["locked"] and str(snap["holders"][0]["fencing_token"]) == sys.argv[1], snap' "$token" ||
    fail "the aarch64 lockgate inspect did not show the holder's token $token: $out"
  expect_token "token $token" "cli: $(basename "$bin") under qemu-aarch64 (no arm64 libraries): lockgate inspect --json shows the x86-64 lockgate run's holder and token"
}

# lockgate.exe under Debian's wine64, against the same loopback redis-server: `run` prints its
# fencing token from `cmd /c`; while the Linux command holds a lock, lockgate.exe's `inspect --json`
# shows that holder's token and its `run --no-wait` is busy (exit 75): one queue across the two;
# and a job that outlives `--max-hold` is ended through its job object (exit 79, lost).
check_cli_win64() {
  local exe=$DIST/cli/lockgate-$VERSION-x86_64-windows.exe host=$DIST/cli/lockgate-$VERSION-x86_64-linux dir out token rc
  [ -f "$exe" ] && [ -x "$host" ] || fail "$exe or $host is missing: ./run package cli"
  ensure_apt wine64
  [ -x "$PKG_TOOLS/bin/python-zig" ] || ensure_pkg_tools
  dir=$(mktemp -d "$LG_TMP/cli-win64.XXXXXX")
  cp "$exe" "$dir/lockgate.exe"
  # Beside the exe: what wine 8.0 lacks (ProcessPrng, which Rust's std imports), for this check only.
  "$PKG_TOOLS/bin/python-zig" cc -target x86_64-windows-gnu -O2 -shared -o "$dir/bcryptprimitives.dll" \
    packaging/wine-bcryptprimitives.c -ladvapi32
  local wine="env -i PATH=$CLEAN_PATH HOME=$dir WINEPREFIX=$PKG_WORK/wine WINEDEBUG=-all LOCKGATE_URL=$REDIS_URL /usr/lib/wine/wine64"
  out=$(cd "$dir" && $wine lockgate.exe run packaging-check-win --wait 10s -- cmd /c 'echo token %LOCKGATE_FENCING_TOKEN%' 2>&1 | tr -d '\r') ||
    fail "lockgate.exe run under wine failed: $out"
  expect_token "$(grep -E '^token ' <<<"$out")" "cli: $(basename "$exe") under wine64: lockgate run, the token from cmd /c"
  out=$(cd "$dir" && env -i PATH=$CLEAN_PATH LOCKGATE_URL="$REDIS_URL" WINE="$wine" "$host" run packaging-check-win --wait 10s -- \
    /bin/sh -c '$WINE lockgate.exe inspect packaging-check-win --json | tr -d "\r"; $WINE lockgate.exe run packaging-check-win --no-wait -- cmd /c "echo ran" >/dev/null 2>&1; echo "busy $?"; echo "token $LOCKGATE_FENCING_TOKEN"') ||
    fail "lockgate.exe beside the Linux holder failed: $out"
  token=$(grep -E '^token ' <<<"$out" | awk '{print $2}')
  grep -qx 'busy 75' <<<"$out" || fail "lockgate.exe run --no-wait was not busy (75) while the Linux command held the lock: $out"
  grep -vE '^(token|busy) ' <<<"$out" | python3 -c 'import json, sys
snap = json.load(sys.stdin)
assert snap["locked"] and str(snap["holders"][0]["fencing_token"]) == sys.argv[1], snap' "$token" ||
    fail "lockgate.exe inspect did not show the Linux holder's token $token: $out"
  expect_token "token $token" "cli: $(basename "$exe") under wine64 beside the Linux lockgate run: inspect --json shows its holder and token, run --no-wait exits 75"
  rc=0
  out=$(cd "$dir" && $wine lockgate.exe run packaging-check-win --max-hold 1s --grace 200ms -- cmd /c 'for /l %i in (1,1,1000000000) do @rem' 2>&1 | tr -d '\r') || rc=$?
  [ "$rc" = 79 ] || fail "lockgate.exe did not end a job past --max-hold with exit 79 (got $rc): $out"
  CHECKED+=("cli: $(basename "$exe") under wine64: a job past --max-hold ended through its job object, exit 79")
  log "check: cli: lockgate.exe ended a job past --max-hold (exit 79)"
  # lockgate.exe SIGKILLed (wine runs it as a Linux process): the kernel's end of its handles
  # closes the job object, which ends the job's `cmd` at once. The loop's bound marks its process.
  local marker=1000000007 pid gone=
  (cd "$dir" && exec $wine lockgate.exe run packaging-check-win -- cmd /c "for /l %i in (1,1,$marker) do @rem" >/dev/null 2>&1) &
  pid=$!
  for _ in $(seq 100); do ps -eo args | grep -q "^cmd /c for /l %i in (1,1,$marker)" && break; sleep 0.1; done
  ps -eo args | grep -q "^cmd /c for /l %i in (1,1,$marker)" || fail "lockgate.exe's job did not start under wine"
  ps -p "$pid" -o args= | grep -q 'lockgate.exe run' || fail "pid $pid is not lockgate.exe: $(ps -p "$pid" -o args=)"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  for _ in $(seq 100); do ps -eo args | grep -q "^cmd /c for /l %i in (1,1,$marker)" || { gone=1; break; }; sleep 0.1; done
  [ -n "$gone" ] || fail "lockgate.exe was killed but its job's cmd still runs"
  CHECKED+=("cli: $(basename "$exe") under wine64: SIGKILLed while its job ran, the job object ended the job's cmd")
  log "check: cli: lockgate.exe killed: its job object ended the command"
}

case ${1:-all} in
  host) start_server; check_python_host; check_node_host; check_jvm_host ;;
  foreign) start_server; check_python_aarch64; check_jvm_aarch64; check_jvm_win64; check_cli_aarch64; check_cli_win64 ;;
  all) start_server; check_python_host; check_node_host; check_jvm_host
    check_python_aarch64; check_jvm_aarch64; check_jvm_win64; check_cli_x86_64; check_cli_aarch64; check_cli_win64 ;;
  # One check by name, e.g. packaging/check.sh python_aarch64.
  *) declare -F "check_$1" >/dev/null || { echo "usage: packaging/check.sh host | foreign | all | NAME (check_NAME)" >&2; exit 2; }
    start_server; "check_$1" ;;
esac
echo
echo "packaging checks passed:"
printf '  %s\n' "${CHECKED[@]}"
