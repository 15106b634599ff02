#!/usr/bin/env bash
# Called by `mvn` (generate-sources): builds the cdylib, generates its Kotlin bindings with
# uniffi-bindgen (library mode), and stages the .so where JNA finds it inside the jar.
#   build-native.sh GENERATED_KOTLIN_DIR NATIVE_RESOURCES_DIR
# LOCKGATE_CARGO_PROFILE=release (default) | dev selects the cargo profile.
set -euo pipefail
gen=$(realpath -m "$1")
res=$(realpath -m "$2")
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
profile=${LOCKGATE_CARGO_PROFILE:-release}
case $profile in
  dev) profile_dir=debug ;;
  *) profile_dir=$profile ;;
esac
target_dir=${CARGO_TARGET_DIR:-$root/target}
case $(uname -s)-$(uname -m) in
  Linux-x86_64) platform=linux-x86-64 ;;
  Linux-aarch64) platform=linux-aarch64 ;;
  *) echo "build-native.sh: unsupported host $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac

cd "$root"
# Separate cargo invocations: building both packages at once would unify uniffi's features
# and give the library the slow `cli` feature.
cargo build --profile "$profile" -p lockgate-jvm --lib
lib=$target_dir/$profile_dir/liblockgate_jvm.so
rm -rf "$gen"
mkdir -p "$gen"
cargo run --quiet -p lockgate-jvm-uniffi-bindgen -- \
  generate --library "$lib" --language kotlin --out-dir "$gen" --no-format
# One call status per thread, reused, instead of a JNA allocation per FFI call (the script says why).
perl "$here/scripts/call-status-pool.pl" "$gen/io/lockgate/internal/ffi/lockgate_jvm.kt"
mkdir -p "$res/$platform"
# Symbols are not needed at run time (JNA looks up the dynamic ones, which strip keeps).
if command -v strip >/dev/null 2>&1; then
  strip --strip-unneeded -o "$res/$platform/liblockgate_jvm.so" "$lib"
else
  cp "$lib" "$res/$platform/liblockgate_jvm.so"
fi
echo "build-native.sh: $(find "$gen" -name '*.kt' | wc -l) Kotlin file(s), $res/$platform/liblockgate_jvm.so"
