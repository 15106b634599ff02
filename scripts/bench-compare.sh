#!/usr/bin/env bash
# Same-run before/after benchmark: the uncontended and contended rows of the core and of every
# binding, for an older commit (BASE) and for the working tree (or a second commit), run
# interleaved on this machine against fresh servers with the same settings; medians per side.
#
#   scripts/bench-compare.sh [options] BASE [HEAD]      (also: ./run bench-compare ...)
#     BASE            a commit: built in a git worktree under target/bench-base/<sha>, with its
#                     own cargo target dir (target/bench-base/<sha>/target) and Python venv
#     HEAD            another commit, built the same way; default: the working tree as it is
#                     (built in place like ./run bench; its Python wheel goes into a venv under
#                     target/bench-base/working-tree-venv, so the interpreter's own install
#                     of lockgate is never replaced)
#     --rounds N      rounds per side (default 3); round r runs base then head when r is odd,
#                     head then base when it is even (A B, B A, A B, ...), each part in turn
#     --only LIST     parts to run, comma-separated from core,python,node,jvm (default: all)
#     --quick         shorter settings, to try the script out (the section says so)
#     --no-write      print the section and keep it in the run directory; BENCHMARKS.md untouched
#
# Each part runs the tree's own benchmark harness with the settings `./run bench` uses:
#   core    lockgate-bench bench --url <fresh redis-server> (uncontended pairs, contended 4 / 16)
#   python  bindings-python/bench/bench.py with the tree's wheel (venv), from bindings-python/tests
#   node    bindings-node/ci.sh bench (libraries both trees have, via --only where supported)
#   jvm     JvmBench + examples/native_bench (the steps of bindings-jvm/ci.sh bench, without its
#           `mvn install`, which would put the tree's jar into ~/.m2)
# Raw outputs and logs: target/bench-compare/<date>-<base>-<head>/. The section "Before/after:
# <base> vs <head>" of BENCHMARKS.md is replaced (or appended); the rest of the file is kept.
set -euo pipefail
# The body is one function, read whole before it runs: editing this file during a comparison
# (it takes minutes) cannot change the running one.
main() {
LG_ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$LG_ROOT"
source scripts/lib.sh
trap cleanup EXIT

usage() { sed -n '5,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

ROUNDS=3
PARTS=core,python,node,jvm
QUICK=0
WRITE=1
ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --only) PARTS=${2:?}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-write) WRITE=0; shift ;;
    -h | --help) usage ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[ ${#ARGS[@]} -ge 1 ] && [ ${#ARGS[@]} -le 2 ] || usage
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds must be a positive whole number" >&2; exit 2; }
IFS=, read -r -a PART_LIST <<<"$PARTS"
for p in "${PART_LIST[@]}"; do
  case $p in core | python | node | jvm) ;; *) echo "unknown part '$p' (core, python, node, jvm)" >&2; exit 2 ;; esac
done

# Settings: those of ./run bench (each harness's defaults), or shorter ones with --quick.
if [ "$QUICK" = 1 ]; then
  CORE_ARGS=(--pairs 1000 --seconds 2)
  PY_ARGS=(--pairs 300 --rounds 3 --handoffs-per-process 30)
  NODE_ARGS=(--seconds 1 --processes 4)
  JVM_ARGS=(1000 4 1)
else
  CORE_ARGS=()
  PY_ARGS=()
  NODE_ARGS=()
  JVM_ARGS=(3000 4 3)
fi

ensure_base
command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"

# ------------------------------------------------------------------------------------ trees

# A commit's worktree under target/bench-base/<sha> (made once, then reused; detached, so no
# branch is created and the main tree's files are never touched).
worktree_for() {
  local sha=$1 dir="$LG_ROOT/target/bench-base/$1"
  if [ -d "$dir" ] && [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" = "$sha" ]; then
    echo "$dir"
    return
  fi
  [ -e "$dir" ] && { echo "$dir exists but is not a worktree of $sha: remove it (git worktree remove --force $dir)" >&2; exit 1; }
  mkdir -p "$LG_ROOT/target/bench-base"
  git worktree add --detach "$dir" "$sha" >&2
  echo "$dir"
}

resolve() { git rev-parse --verify -q "$1^{commit}" || { echo "not a commit: $1" >&2; exit 2; }; }

BASE_SHA=$(resolve "${ARGS[0]}")
BASE_TREE=$(worktree_for "$BASE_SHA")
BASE_LABEL=$(git rev-parse --short "$BASE_SHA")
BASE_TARGET=$BASE_TREE/target
BASE_VENV=$BASE_TREE/target/bench-venv
if [ ${#ARGS[@]} -eq 2 ]; then
  HEAD_SHA=$(resolve "${ARGS[1]}")
  HEAD_TREE=$(worktree_for "$HEAD_SHA")
  HEAD_LABEL=$(git rev-parse --short "$HEAD_SHA")
  HEAD_TARGET=$HEAD_TREE/target
  HEAD_VENV=$HEAD_TREE/target/bench-venv
  HEAD_DESC="commit $HEAD_LABEL"
else
  HEAD_SHA=$(git rev-parse HEAD)
  HEAD_TREE=$LG_ROOT
  HEAD_LABEL=$(git rev-parse --short HEAD)
  HEAD_TARGET=${CARGO_TARGET_DIR:-$LG_ROOT/target}
  HEAD_VENV=$LG_ROOT/target/bench-base/working-tree-venv
  HEAD_DESC="the working tree at $HEAD_LABEL"
  if [ -n "$(git status --porcelain --untracked-files=no -- core cli bindings-python bindings-node bindings-jvm Cargo.toml Cargo.lock)" ]; then
    HEAD_DESC+=" with uncommitted changes"
  fi
fi
[ "$BASE_SHA" = "$HEAD_SHA" ] && [ ${#ARGS[@]} -eq 2 ] && { echo "BASE and HEAD are the same commit" >&2; exit 2; }

RUN_DIR=$LG_ROOT/target/bench-compare/$(date -u +%Y%m%dT%H%M%SZ)-$BASE_LABEL-$HEAD_LABEL
mkdir -p "$RUN_DIR"
log "comparing $BASE_LABEL (base) with $HEAD_DESC (head); output in ${RUN_DIR#"$LG_ROOT"/}"
STARTED=$(date +%s)

has_part() { [[ ",$PARTS," == *",$1,"* ]]; }

tree_of() { if [ "$1" = base ]; then echo "$BASE_TREE"; else echo "$HEAD_TREE"; fi; }
target_of() { if [ "$1" = base ]; then echo "$BASE_TARGET"; else echo "$HEAD_TARGET"; fi; }
venv_of() { if [ "$1" = base ]; then echo "$BASE_VENV"; else echo "$HEAD_VENV"; fi; }

# Runs "$@" in the tree of side $1 with that tree's cargo target dir, output to log file $2.
in_tree() {
  local side=$1 logf=$2
  shift 2
  (cd "$(tree_of "$side")" && CARGO_TARGET_DIR=$(target_of "$side") "$@") >>"$logf" 2>&1 ||
    { log "failed ($side): $* — see ${logf#"$LG_ROOT"/}"; tail -n 20 "$logf" >&2; return 1; }
}

# ----------------------------------------------------------------------------------- builds

build_side() {
  local side=$1 tree target venv logf
  tree=$(tree_of "$side")
  target=$(target_of "$side")
  venv=$(venv_of "$side")
  logf=$RUN_DIR/build-$side.log
  log "building $side ($tree)"
  if has_part core; then
    in_tree "$side" "$logf" cargo build --release -q -p lockgate-cli
  fi
  if has_part python; then
    # A venv per tree that sees the interpreter's packages (maturin, redis-py, python-redis-lock)
    # and gets its own lockgate: the tree's wheel, built the way bindings-python/ci.sh builds it.
    [ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
    in_tree "$side" "$logf" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
      --no-build-isolation --no-deps --force-reinstall ./bindings-python
    local where
    where=$(cd "$tree/bindings-python/tests" && "$venv/bin/python" -c 'import lockgate, os; print(os.path.realpath(lockgate.__file__))')
    case $where in "$venv"/*) ;; *) log "python ($side) imports lockgate from $where, not from its venv"; return 1 ;; esac
  fi
  if has_part node; then
    # npm ci only where node_modules is missing: it recreates the folder, which a test running in
    # the working tree at the same time would lose.
    if [ ! -d "$tree/bindings-node/node_modules/ioredis" ]; then
      in_tree "$side" "$logf" bindings-node/ci.sh install
    fi
    in_tree "$side" "$logf" bindings-node/ci.sh build
  fi
  if has_part jvm; then
    # bindings-jvm/ci.sh bench's steps, with test-compile instead of install (no ~/.m2 write),
    # and the tree's own test-server launcher (its ensure_launcher), which JvmBench starts its
    # redis-server with (no other part builds it).
    in_tree "$side" "$logf" bash -c 'cd bindings-jvm &&
      mvn -B -ntp -q test-compile &&
      mvn -B -ntp -q dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$PWD/target/test-classpath.txt" &&
      cd .. && cargo build --release -q -p lockgate-jvm --example native_bench &&
      cargo build --release -q -p lockgate-conformance --bin test-servers'
  fi
}

# --------------------------------------------------------------------------------- the runs

# Node: the libraries both trees' harnesses have, passed as --only (a harness without --only
# runs all of its own, which must then be the same set).
node_libs() {
  (cd "$(tree_of "$1")/bindings-node" && node -e 'console.log(Object.keys(require("./bench/libs").libs).join("\n"))')
}

run_part() {
  local part=$1 side=$2 out=$3 tree target venv logf
  tree=$(tree_of "$side")
  target=$(target_of "$side")
  venv=$(venv_of "$side")
  logf=$out/$part.log
  mkdir -p "$out"
  case $part in
    core)
      redis_start
      local port=$REDIS_PORT
      # lockgate-bench since the lockgate command came (issue 26); lockgate-cli before it.
      local bench_bin="$target/release/lockgate-bench"
      [ -x "$bench_bin" ] || bench_bin="$target/release/lockgate-cli"
      in_tree "$side" "$logf" "$bench_bin" bench --url "redis://127.0.0.1:$port" \
        --out "$out/core.md" "${CORE_ARGS[@]}"
      # Stop this part's server now (by the pid redis_start recorded), not at exit.
      kill "${LG_PIDS[-1]}" 2>/dev/null || true
      wait "${LG_PIDS[-1]}" 2>/dev/null || true
      ;;
    python)
      in_tree "$side" "$logf" bash -c 'cd bindings-python/tests && exec "$0" ../bench/bench.py --out "$1" "${@:2}"' \
        "$venv/bin/python" "$out/python.md" "${PY_ARGS[@]}"
      ;;
    node)
      local only=()
      grep -q "arg('only'" "$tree/bindings-node/bench/bench.js" && only=(--only "$NODE_LIBS")
      in_tree "$side" "$logf" env LOCKGATE_BENCH_OUT="$out" bindings-node/ci.sh bench "${NODE_ARGS[@]}" "${only[@]}"
      ;;
    jvm)
      in_tree "$side" "$logf" bash -c 'cd bindings-jvm &&
        exec java -cp "target/classes:target/test-classes:$(cat target/test-classpath.txt)" io.lockgate.JvmBench \
          "$CARGO_TARGET_DIR/release/examples/native_bench" "$0" "bindings-jvm/ci.sh bench" "$@"' \
        "$out/jvm.md" "${JVM_ARGS[@]}"
      ;;
  esac
}

if has_part python; then "$LG_ROOT/bindings-python/ci.sh" install; fi
build_side base
build_side head
BUILT=$(date +%s)
log "builds took $((BUILT - STARTED)) s"

if has_part node; then
  NODE_LIBS=$(comm -12 <(node_libs base | sort) <(node_libs head | sort) | paste -sd, -)
  for side in base head; do
    if ! grep -q "arg('only'" "$(tree_of $side)/bindings-node/bench/bench.js" &&
      [ "$(node_libs $side | sort | paste -sd, -)" != "$NODE_LIBS" ]; then
      log "warning: the $side Node harness has no --only and runs other libraries than $NODE_LIBS"
    fi
  done
fi

FAILED=()
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order=(base head); else order=(head base); fi
  for part in "${PART_LIST[@]}"; do
    for side in "${order[@]}"; do
      t0=$(date +%s)
      if run_part "$part" "$side" "$RUN_DIR/$side-r$r"; then
        log "round $r/$ROUNDS $part $side: $(($(date +%s) - t0)) s"
      else
        FAILED+=("$part/$side/r$r")
      fi
    done
  done
done
FINISHED=$(date +%s)

command_line="scripts/bench-compare.sh"
[ "$ROUNDS" != 3 ] && command_line+=" --rounds $ROUNDS"
[ "$PARTS" != core,python,node,jvm ] && command_line+=" --only $PARTS"
[ "$QUICK" = 1 ] && command_line+=" --quick"
command_line+=" ${ARGS[*]}"
report=(python3 "$LG_ROOT/scripts/bench_compare_report.py" --run-dir "$RUN_DIR" --rounds "$ROUNDS"
  --base "$BASE_LABEL" --head "$HEAD_LABEL" --head-desc "$HEAD_DESC" --command "$command_line"
  --quick "$QUICK" --seconds "$((FINISHED - STARTED))" --build-seconds "$((BUILT - STARTED))"
  --failed "${FAILED[*]:-}")
"${report[@]}" >"$RUN_DIR/section.md"
cat "$RUN_DIR/section.md"
if [ "$WRITE" = 1 ]; then
  python3 "$LG_ROOT/scripts/bench_compare_report.py" --splice "$RUN_DIR/section.md" --into "$LG_ROOT/BENCHMARKS.md"
  log "wrote the before/after section of BENCHMARKS.md"
fi
log "comparison took $((FINISHED - STARTED)) s (builds $((BUILT - STARTED)) s); raw results in ${RUN_DIR#"$LG_ROOT"/}"
[ ${#FAILED[@]} -eq 0 ] || { log "failed runs: ${FAILED[*]}"; exit 1; }
}
main "$@"
