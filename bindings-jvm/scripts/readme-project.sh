#!/usr/bin/env bash
# The JVM install step and example as a new user runs them (issue 23, item 11), after
# `mvn install` put io.lockgate:lockgate into ~/.m2 (ci.sh test and ci.sh build do):
#   - both READMEs give the same install step (`bindings-jvm/ci.sh build`) and the same coordinates
#     (the top README's `io.lockgate:lockgate:V` = bindings-jvm/README.md's <dependency> block =
#     this build's pom.xml);
#   - a new Maven project in an empty temp directory, whose only dependency is that <dependency>
#     block copied from the README, compiles the top README's Java program and runs it
#     offline (`mvn -o`: everything from ~/.m2) against a redis-server from the project's launcher,
#     with the one substitution the READMEs state: the URL string is replaced by the server's.
# Exits non-zero, saying why, when any of that fails.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
launcher=${LOCKGATE_TEST_SERVERS:-${CARGO_TARGET_DIR:-$root/target}/release/test-servers}

fail() { echo "readme-project: $*" >&2; exit 1; }

# The text between the first line matching $2 and the next line matching $3, of file $1.
between() { awk -v a="$2" -v b="$3" '$0 ~ a {on=1; next} on && $0 ~ b {exit} on' "$1"; }

top_java=$(between "$root/README.md" '^## Java$' '^## Features$')
[[ -n $top_java ]] || fail "README.md has no '## Java' section"
dependency=$(between "$here/README.md" '^```xml$' '^```$')
grep -q '<dependency>' <<<"$dependency" || fail "bindings-jvm/README.md's first xml block is not a <dependency>"
tag() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" <<<"$2" | head -1; }
coords="$(tag groupId "$dependency"):$(tag artifactId "$dependency"):$(tag version "$dependency")"
pom_head=$(sed -n '1,/<\/version>/p' "$here/pom.xml")
built="$(tag groupId "$pom_head"):$(tag artifactId "$pom_head"):$(tag version "$pom_head")"
[[ $coords == "$built" ]] || fail "bindings-jvm/README.md depends on $coords, the build installs $built"
grep -qF "depend on \`$coords\`" <<<"$top_java" || fail "README.md's Java section does not say: depend on \`$coords\`"
grep -q '^bindings-jvm/ci.sh build ' <<<"$top_java" || fail "README.md's Java section does not install with bindings-jvm/ci.sh build"
grep -q '^bindings-jvm/ci.sh build ' "$here/README.md" || fail "bindings-jvm/README.md does not install with bindings-jvm/ci.sh build"

program=$(awk '/^```java$/ {on=1; next} on && /^```$/ {exit} on' <<<"$top_java")
grep -q 'public class Main' <<<"$program" || fail "README.md's Java example is not a class Main"

[[ -x $launcher ]] || fail "$launcher is missing: cargo build --release -p lockgate-conformance"
dir=$(mktemp -d "${TMPDIR:-/tmp}/lockgate-readme-project-XXXXXX")
coproc LAUNCH { exec "$launcher" single; }
launch_pid=$LAUNCH_PID
cleanup() {
  local fd=${LAUNCH[1]:-}
  [[ -n $fd ]] && eval "exec $fd>&-"  # the launcher stops its servers when its stdin closes
  wait "$launch_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
read -r info <&"${LAUNCH[0]}" || fail "the launcher did not start a redis-server"
url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' <<<"$info")
[[ $url == redis://* ]] || fail "no redis URL in the launcher's reply: $info"

mkdir -p "$dir/src/main/java"
sed -E "s#\"redis://[^\"]*\"#\"$url\"#" <<<"$program" >"$dir/src/main/java/Main.java"
# A user's pom: the README's <dependency> block, Java 17, and the plugin versions this build
# already uses (Maven 3.8's defaults are older ones that are not in ~/.m2 offline).
cat >"$dir/pom.xml" <<EOF
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
  <dependencies>
$dependency
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
echo "readme-project: $coords from ~/.m2 in a new project ($dir), the top README's program against $url"
out=$(cd "$dir" && mvn -o -B -q -Dstyle.color=never compile exec:java -Dexec.mainClass=Main 2>&1 | sed "s/\x1b\[[0-9;]*m//g") ||
  fail "the project did not build or run:"$'\n'"$out"
grep -q '^holding orders:42, fencing token [0-9][0-9]*$' <<<"$out" || fail "the program printed no fencing token:"$'\n'"$out"
echo "readme-project: ok ($(grep -m1 'fencing token' <<<"$out"))"
