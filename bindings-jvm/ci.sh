#!/usr/bin/env bash
# The JVM binding's entry point for ./run and CI.
#   ci.sh install   prerequisites (idempotent): JDK 17+, Maven, redis-server, zookeeper, cargo
#   ci.sh test      builds the native library + Kotlin + Java, runs the JUnit suite against
#                   real redis-server and ZooKeeper processes (started by target/release/test-servers,
#                   built if missing; Curator from Maven Central for the interop tests), installs
#                   io.lockgate:lockgate into ~/.m2, then the README's install step and Java program in a
#                   new Maven project from ~/.m2 (scripts/readme-project.sh)
#   ci.sh readme-project   only that last step (after ci.sh build or test)
#   ci.sh build     the same build without tests (for the conformance actor / demo)
#   ci.sh bench     issue 7's benchmark (Java vs the core on Redis; $LOCKGATE_BENCH_OUT/jvm.md, default
#                   target/bench), issue 30's (lockgate vs Redisson RLock and RFencedLock;
#                   jvm-redisson.md), then issue 15's (lockgate vs Curator InterProcessMutex on
#                   ZooKeeper; $LOCKGATE_BENCH_OUT/jvm-zookeeper.md)
#   ci.sh bench-zookeeper   only issue 15's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
mvn_flags=(-B -ntp)

java_ok() {
  command -v javac >/dev/null 2>&1 || return 1
  local v
  v=$(javac -version 2>&1 | sed -E 's/^javac ([0-9]+).*/\1/')
  [[ $v =~ ^[0-9]+$ ]] && ((v >= 17))
}

install() {
  local need=()
  java_ok || need+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
  # Debian's ZooKeeper 3.8 (the launcher's zookeeper kind runs its jar; no service is started).
  [ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
  if ((${#need[@]})); then
    echo "ci.sh install: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "ci.sh install: cargo is missing (the Rust toolchain is the repository's prerequisite)" >&2
    exit 1
  fi
  echo "ci.sh install: $(javac -version 2>&1), $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g'), $(redis-server --version | cut -d' ' -f1-3), $(cargo --version)"
}

# The project's one test-server launcher (conformance/README.md), which the tests run.
ensure_launcher() {
  if [[ -z ${LOCKGATE_TEST_SERVERS:-} && ! -x ${CARGO_TARGET_DIR:-$root/target}/release/test-servers ]]; then
    echo "ci.sh: building the test-server launcher (target/release/test-servers)"
    (cd "$root" && cargo build --release -q -p lockgate-conformance)
  fi
}

run_test() {
  cd "$here"
  ensure_launcher
  # install = build native + generate Kotlin + compile + test (Surefire summary) + jar + ~/.m2
  mvn "${mvn_flags[@]}" install
  write_classpath
  # The installed artifact as a user's project gets it (needs the install above).
  bash "$here/scripts/readme-project.sh"
}

# The test classpath, for the conformance actor (conformance-actor.sh) and the benchmark.
write_classpath() {
  mvn "${mvn_flags[@]}" -q dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$here/target/test-classpath.txt"
}

run_build() {
  cd "$here"
  # Compiles the test classes too (the conformance actor and the benchmark live there).
  mvn "${mvn_flags[@]}" -q install -DskipTests
  write_classpath
}

run_bench() {
  cd "$here"
  local out_dir=${LOCKGATE_BENCH_OUT:-$root/target/bench}
  mkdir -p "$out_dir"
  out_dir=$(cd "$out_dir" && pwd)
  run_build
  ensure_launcher
  (cd "$root" && cargo build --release -p lockgate-jvm --example native_bench)
  local cp="$here/target/classes:$here/target/test-classes:$(cat "$here/target/test-classpath.txt")"
  java -cp "$cp" io.lockgate.JvmBench \
    "${CARGO_TARGET_DIR:-$root/target}/release/examples/native_bench" \
    "$out_dir/jvm.md" \
    "bindings-jvm/ci.sh bench" \
    "${LOCKGATE_BENCH_PAIRS:-3000}" 4 "${LOCKGATE_BENCH_SECONDS:-3}"
  echo "ci.sh bench: wrote $out_dir/jvm.md"
  # lockgate vs Redisson RLock and RFencedLock on one redis-server from the launcher.
  java -cp "$cp" -Dlockgate.test.tmp="$here/target/test-tmp" io.lockgate.RedissonBench \
    "$out_dir/jvm-redisson.md" \
    "bindings-jvm/ci.sh bench" \
    "${LOCKGATE_BENCH_REDISSON_PAIRS:-2000}" "${LOCKGATE_BENCH_REDISSON_ROUNDS:-3}" "${LOCKGATE_BENCH_SECONDS:-3}"
  echo "ci.sh bench: wrote $out_dir/jvm-redisson.md"
  zookeeper_bench
}

run_bench_zookeeper() {
  run_build
  zookeeper_bench
}

# lockgate vs Curator InterProcessMutex on one ZooKeeper server from the launcher (built classes).
zookeeper_bench() {
  cd "$here"
  local out_dir=${LOCKGATE_BENCH_OUT:-$root/target/bench}
  mkdir -p "$out_dir"
  out_dir=$(cd "$out_dir" && pwd)
  ensure_launcher
  local cp="$here/target/classes:$here/target/test-classes:$(cat "$here/target/test-classpath.txt")"
  java -cp "$cp" -Dlockgate.test.tmp="$here/target/test-tmp" io.lockgate.ZkBench \
    "$out_dir/jvm-zookeeper.md" \
    "bindings-jvm/ci.sh bench" \
    "${LOCKGATE_BENCH_ZK_PAIRS:-1000}" "${LOCKGATE_BENCH_ZK_ROUNDS:-7}" "${LOCKGATE_BENCH_SECONDS:-3}"
  echo "ci.sh bench: wrote $out_dir/jvm-zookeeper.md"
}

case ${1:-} in
  install) install ;;
  test) run_test ;;
  build) run_build ;;
  readme-project) ensure_launcher && bash "$here/scripts/readme-project.sh" ;;
  bench) run_bench ;;
  bench-zookeeper) run_bench_zookeeper ;;
  *)
    echo "usage: $0 install|test|build|readme-project|bench|bench-zookeeper" >&2
    exit 2
    ;;
esac
