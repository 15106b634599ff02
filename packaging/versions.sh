#!/usr/bin/env bash
# One version for every artifact, from one place: the workspace's Cargo.toml
# ([workspace.package] version). The crates inherit it (version.workspace = true), the Python
# wheel reads it through maturin (pyproject.toml: dynamic = ["version"]); the two manifests
# that cannot read it are stamped from it:
#   packaging/versions.sh check   fails, naming the file, when any artifact says another version
#   packaging/versions.sh stamp   writes the workspace version into package.json, package-lock.json,
#                                 pom.xml and the READMEs' install lines (after a version bump)
#   packaging/versions.sh print   prints the version
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

version=$(awk '/^\[workspace.package\]/ {on=1; next} /^\[/ {on=0} on && /^version *=/ {gsub(/[" ]/, "", $0); sub(/version=/, "", $0); print; exit}' Cargo.toml)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] || { echo "versions: no [workspace.package] version in Cargo.toml" >&2; exit 1; }

node_version() { node -p "require('./$1').version" 2>/dev/null || python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['version'])" "$1"; }
lock_version() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['version'], d['packages']['']['version'])" "$1"; }
# The project's own <version> (the first one, before <dependencies>).
pom_version() { sed -n '1,/<packaging>/p' bindings-jvm/pom.xml | sed -n 's:^  <version>\(.*\)</version>:\1:p' | head -1; }
# Cargo crates that do not take the workspace's version.
own_versions() { grep -l '^version *= *"' core/Cargo.toml cli/Cargo.toml conformance/Cargo.toml bindings-*/Cargo.toml bindings-jvm/uniffi-bindgen/Cargo.toml 2>/dev/null || true; }

check() {
  local bad=0 v
  say() { echo "versions: $*" >&2; bad=1; }
  v=$(node_version bindings-node/package.json); [[ $v == "$version" ]] || say "bindings-node/package.json is $v, the workspace is $version (packaging/versions.sh stamp)"
  v=$(lock_version bindings-node/package-lock.json); [[ $v == "$version $version" ]] || say "bindings-node/package-lock.json is $v, the workspace is $version"
  v=$(pom_version); [[ $v == "$version" ]] || say "bindings-jvm/pom.xml is $v, the workspace is $version"
  grep -q '^dynamic = \["version"\]' bindings-python/pyproject.toml || say "bindings-python/pyproject.toml does not take its version from Cargo.toml (dynamic = [\"version\"])"
  grep -q '^version *= *"' bindings-python/pyproject.toml && say "bindings-python/pyproject.toml sets its own version"
  for f in $(own_versions); do say "$f sets its own version (use version.workspace = true)"; done
  grep -q "^## \[$version\]" CHANGELOG.md || say "CHANGELOG.md has no '## [$version]' section"
  local readme
  for readme in README.md bindings-python/README.md bindings-node/README.md bindings-jvm/README.md; do
    while read -r other; do
      [[ -z $other || $other == "$version" ]] || say "$readme names version $other, the workspace is $version"
    done < <(grep -oE 'lockgate-[0-9]+\.[0-9]+\.[0-9]+|io\.lockgate:lockgate:[0-9][^` ]*|<version>[0-9][^<]*</version>' "$readme" |
      sed -E 's/^lockgate-//; s/^io\.lockgate:lockgate://; s:^<version>(.*)</version>$:\1:' | sort -u)
  done
  [[ $bad == 0 ]] && echo "versions: every artifact is $version"
  return $bad
}

stamp() {
  python3 - "$version" <<'PY'
import json, re, sys
v = sys.argv[1]
for path in ("bindings-node/package.json", "bindings-node/package-lock.json"):
    d = json.load(open(path))
    d["version"] = v
    if "packages" in d:
        d["packages"][""]["version"] = v
    open(path, "w").write(json.dumps(d, indent=2) + "\n")
pom = open("bindings-jvm/pom.xml").read()
head, sep, rest = pom.partition("<packaging>")
head = re.sub(r"^  <version>[^<]*</version>", f"  <version>{v}</version>", head, count=1, flags=re.M)
open("bindings-jvm/pom.xml", "w").write(head + sep + rest)
for path in ("README.md", "bindings-python/README.md", "bindings-node/README.md", "bindings-jvm/README.md"):
    s = open(path).read()
    s = re.sub(r"lockgate-\d+\.\d+\.\d+(?=[-.])", f"lockgate-{v}", s)
    s = re.sub(r"io\.lockgate:lockgate:[0-9][^` ]*", f"io.lockgate:lockgate:{v}", s)
    s = re.sub(r"(<artifactId>lockgate</artifactId>\s*<version>)[^<]*(</version>)", rf"\g<1>{v}\2", s)
    open(path, "w").write(s)
PY
  echo "versions: stamped $version"
}

case ${1:-check} in
  check) check ;;
  stamp) stamp ;;
  print) echo "$version" ;;
  *) echo "usage: packaging/versions.sh check | stamp | print" >&2; exit 2 ;;
esac
