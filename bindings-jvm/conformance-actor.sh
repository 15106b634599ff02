#!/usr/bin/env bash
# The JVM conformance actor (conformance/README.md), run from the repository root after
# `bindings-jvm/ci.sh build`: java with the module's classes, test classes and dependencies.
here=$(cd "$(dirname "$0")" && pwd)
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
  -cp "$here/target/classes:$here/target/test-classes:$(cat "$here/target/test-classpath.txt")" \
  io.lockgate.ConformanceActor "$@"
