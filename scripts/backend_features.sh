#!/usr/bin/env bash
# Each backend alone: for every backend folder core/src/backend/<name>/ (its cargo feature has
# the folder's name), `cargo tree -p lockgate-core --no-default-features --features tokio,<name>`
# must hold none of the other backends' crates (the `dep:` entries of their features in
# core/Cargo.toml, less its own and the TLS stack several backends share), and the same feature
# set must compile (`cargo check`: a library's code generation finds nothing more, and it costs
# a clean CI clone five builds of the core). A new backend folder is checked without editing this script.
set -euo pipefail
cd "$(dirname "$0")/.."

# Crates more than one backend builds on, no backend's client: the TLS stack, and `url` (the
# Redis URL grammar's, and sqlx's and tokio-postgres's underneath).
shared="rustls tokio-rustls rustls-native-certs url"

features=$(cargo metadata -q --no-deps --format-version 1 |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(json.dumps(next(p for p in m["packages"] if p["name"]=="lockgate-core")["features"]))')

# The crates a feature brings, following the features it enables (redlock -> redis).
crates_of() {
  python3 - "$features" "$@" <<'PY'
import json, sys
features = json.loads(sys.argv[1])
def crates(f, seen):
    if f in seen or f not in features:
        return set()
    seen.add(f)
    out = set()
    for item in features[f]:
        if item.startswith("dep:"):
            out.add(item[4:])
        else:
            out |= crates(item.split("/")[0], seen)
    return out
result = set()
for f in sys.argv[2:]:
    result |= crates(f, set())
print(" ".join(sorted(result)))
PY
}

failed=0
backends=$(for d in core/src/backend/*/; do basename "$d"; done)
for b in $backends; do
  own=$(crates_of "$b" tokio)
  others=$(crates_of $(echo "$backends" | grep -vx "$b"))
  tree=$(cargo tree -q -p lockgate-core --no-default-features --features "tokio,$b" -e normal --prefix none | awk '{print $1}' | sort -u)
  for c in $others; do
    if ! grep -qxF "$c" <<<"$(tr ' ' '\n' <<<"$own $shared")" && grep -qxF "$c" <<<"$tree"; then
      echo "backend $b alone pulls $c, another backend's crate" >&2
      failed=1
    fi
  done
  echo "backend $b alone: builds with $(echo "$own" | tr ' ' ',')"
  cargo check -q -p lockgate-core --no-default-features --features "tokio,$b" || failed=1
done
exit $failed
