# The steps of ./run package (packaging/package.sh) and the tools they need, installed
# idempotently (quick when present). Sourced after scripts/lib.sh.

PKG_TOOLS=$LG_ROOT/target/packaging/tools   # a virtualenv (maturin, ziglang, auditwheel, pdoc) + cargo-zigbuild
PKG_WORK=$LG_ROOT/target/packaging
VERSION=$(packaging/versions.sh print)
# Where the checks look for the artifacts: dist/, or the host-only set ./run test builds.
DIST=${LOCKGATE_DIST:-$LG_ROOT/dist}

# The wheels: (rust target, maturin --compatibility). Each builds in target/<triple>/ (the musl
# ones share the lockgate command's). The Windows wheel is assembled apart (python_windows_wheel);
# not built here: macOS (README's platform table says why).
PY_TARGETS=(
  "x86_64-unknown-linux-gnu manylinux2014"
  "aarch64-unknown-linux-gnu manylinux2014"
  "x86_64-unknown-linux-musl musllinux_1_2"
  "aarch64-unknown-linux-musl musllinux_1_2"
)
HOST_TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
# The JVM's native libraries: (rust target for cargo zigbuild, JNA resource dir, file name).
# The .2.17 suffix: link against glibc 2.17's symbols (the manylinux_2_17 baseline). The host's
# own library is the one the JVM suite builds (cargo build, target/release: the build
# machine's glibc is its baseline). win32-x86-64: MinGW's ABI (x86_64-pc-windows-gnu, zig
# links it; JNA loads lockgate_jvm.dll from that resource directory). Not darwin (see README's
# platform table).
JVM_TARGETS=(
  "x86_64-unknown-linux-gnu linux-x86-64 liblockgate_jvm.so"
  "aarch64-unknown-linux-gnu.2.17 linux-aarch64 liblockgate_jvm.so"
  "x86_64-pc-windows-gnu win32-x86-64 lockgate_jvm.dll"
)
# The `lockgate` command's binaries: (rust target, file name in dist/cli). musl's libc is linked
# in (Rust's *-linux-musl targets are static by default), zig's cc builds aws-lc's C for them and
# links; the Windows one (MinGW's ABI, zig links its runtime in) needs Windows' own DLLs only.
CLI_TARGETS=(
  "x86_64-unknown-linux-musl lockgate-$VERSION-x86_64-linux"
  "aarch64-unknown-linux-musl lockgate-$VERSION-aarch64-linux"
  "x86_64-pc-windows-gnu lockgate-$VERSION-x86_64-windows.exe"
)
# $1 as an absolute path (relative ones are from the repository's root).
abspath() { [[ $1 = /* ]] && echo "$1" || echo "$LG_ROOT/$1"; }

ensure_rust_targets() {
  local installed t
  installed=$(rustup target list --installed)
  for t in "$@"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
  done
}

# The packaging tools in target/packaging/tools: maturin with zig (cross linking without a
# system cross compiler, glibc 2.17 symbols), auditwheel, pdoc, wheel (unpack/pack); cargo-zigbuild
# for the non-Python libraries and binaries and the Windows wheel's library.
ensure_pkg_tools() {
  ensure_apt python3-venv file unzip zip
  if [ ! -x "$PKG_TOOLS/bin/pip" ]; then
    python3 -m venv "$PKG_TOOLS"
  fi
  local want="maturin==1.16.0 ziglang==0.15.2 auditwheel==6.8.2 pdoc==16.0.0 wheel==0.45.1"
  if [ "$(cat "$PKG_TOOLS/.requirements" 2>/dev/null)" != "$want" ]; then
    # shellcheck disable=SC2086
    "$PKG_TOOLS/bin/pip" install -q --disable-pip-version-check $want
    echo "$want" > "$PKG_TOOLS/.requirements"
  fi
  if ! "$PKG_TOOLS/bin/cargo-zigbuild" --version 2>/dev/null | grep -q '^cargo-zigbuild 0\.24\.'; then
    cargo install --quiet --locked --root "$PKG_TOOLS" cargo-zigbuild --version '~0.24'
  fi
  export PATH="$PKG_TOOLS/bin:$PATH"
}

# ---- versions ----

package_versions() {
  packaging/versions.sh check
}

# ---- Python ----

package_python() {
  ensure_pkg_tools
  local t compat wheel
  for t in "${PY_TARGETS[@]}"; do ensure_rust_targets "${t%% *}"; done
  rm -rf dist/python && mkdir -p dist/python
  for t in "${PY_TARGETS[@]}"; do
    read -r triple compat <<<"$t"
    log "python: wheel for $triple ($compat)"
    # --target even for the host's triple: zig's environment would otherwise rebuild (and
    # thrash) the warm target/release the tests use.
    nice maturin build --release --zig --compatibility "$compat" --target "$triple" -m bindings-python/Cargo.toml -o dist/python >&2
  done
  python_windows_wheel
  log "python: sdist"
  maturin sdist -m bindings-python/Cargo.toml -o dist/python >&2
  # What a wheel may link: a musllinux one musl alone (musl_wheel_check); for a manylinux one
  # auditwheel reads the ELF needs and says which platform tag they are consistent with, which
  # must be the one the file claims.
  for wheel in dist/python/*musllinux*.whl; do
    [ -f "$wheel" ] || continue
    musl_wheel_check "$wheel"
  done
  for wheel in dist/python/*manylinux*.whl; do
    local tag out
    # The wheel's most specific tag (manylinux2014_x.manylinux_2_17_x: manylinux_2_17_x).
    tag=$(basename "$wheel" .whl | sed -E 's/.*-cp39-abi3-//; s/.*\.//')
    out=$(auditwheel show "$wheel" 2>&1) || { echo "$out" >&2; return 1; }
    tr '\n' ' ' <<<"$out" | grep -q "consistent with the following platform tag: \"$tag\"" ||
      { echo "auditwheel: $wheel is not consistent with its tag $tag:" >&2; echo "$out" >&2; return 1; }
    log "python: auditwheel: $(basename "$wheel") is $tag"
  done
}

# The Windows x86-64 wheel. maturin 1.16's `--zig` link for windows-gnu exports the entry point
# under the dotted module name (`PyInit_lockgate._lockgate`) from an export list of its own that
# overrides ours, and CPython looks up `PyInit__lockgate`; so the library is linked as the JVM's
# is (cargo-zigbuild, our own .def), and the wheel is the x86-64 manylinux one's tree (the same
# Python package and metadata: nothing in them is per platform) with that library in place of
# the .so and the Windows tag, packed again by `wheel`, which writes RECORD's hashes.
python_windows_wheel() {
  local triple=x86_64-pc-windows-gnu work=$PKG_WORK/python-windows linux tree dll
  ensure_rust_targets "$triple"
  log "python: wheel for $triple (cargo-zigbuild with our own .def)"
  rm -rf "$work" && mkdir -p "$work"
  printf 'LIBRARY _lockgate.pyd\nEXPORTS\n    PyInit__lockgate\n' > "$work/_lockgate.def"
  nice cargo-zigbuild rustc --release -p lockgate-python --lib --target "$triple" --features pyo3/extension-module \
    -- -C link-arg="$work/_lockgate.def" >&2
  dll=target/$triple/release/_lockgate.dll
  linux=$(ls dist/python/lockgate-"$VERSION"-cp39-abi3-manylinux*_x86_64.whl | head -1)
  wheel unpack -d "$work" "$linux" >&2
  tree=$work/lockgate-$VERSION
  rm "$tree"/lockgate/_lockgate*.so
  cp "$dll" "$tree/lockgate/_lockgate.pyd"
  strip --strip-unneeded "$tree/lockgate/_lockgate.pyd"
  sed -i '/^Tag: /d' "$tree/lockgate-$VERSION.dist-info/WHEEL"
  echo "Tag: cp39-abi3-win_amd64" >> "$tree/lockgate-$VERSION.dist-info/WHEEL"
  wheel pack -d dist/python "$tree" >&2
  windows_wheel_check "dist/python/lockgate-$VERSION-cp39-abi3-win_amd64.whl"
}

# The DLLs every Windows installation has (an extended regular expression for `grep -ixE`): what a
# Windows artifact may import beside its own.
WINDOWS_OWN_DLLS='api-ms-win-[a-z0-9-]+\.dll|(kernel32|ntdll|ws2_32|userenv|secur32|advapi32|crypt32|bcrypt|bcryptprimitives|ole32|oleaut32|shell32|user32|ucrtbase|msvcrt|iphlpapi|ncrypt)\.dll'

# The DLLs the PE file $1 imports, one line, sorted.
pe_imports() {
  objdump -p "$1" | sed -n 's/^\tDLL Name: //p' | sort -uf | paste -sd' ' -
}

# What the Windows wheel's extension must export and may import: `PyInit__lockgate`, and the
# stable ABI's `python3.dll` (never a `python3X.dll` of one version) beside Windows' own DLLs
# (no MinGW runtime DLL such as `libgcc_s_seh-1.dll` or `libwinpthread-1.dll`: zig links those in).
windows_wheel_check() {
  local wheel=$1 dir pyd dlls
  [ -f "$wheel" ] || { echo "no $wheel" >&2; return 1; }
  dir=$(mktemp -d "$LG_TMP/windows-wheel.XXXXXX")
  unzip -q "$wheel" 'lockgate/*' -d "$dir"
  pyd=$dir/lockgate/_lockgate.pyd
  [ -f "$dir/lockgate/__init__.py" ] || { echo "$wheel lacks lockgate/__init__.py" >&2; return 1; }
  file -b "$pyd" | grep -q 'PE32+ executable (DLL).*x86-64' || { echo "$wheel: _lockgate.pyd is not an x86-64 DLL" >&2; return 1; }
  # (the listings read whole: grep -q's early exit would fail objdump under pipefail)
  [ "$(objdump -p "$pyd" | grep -cx $'\t\[ *[0-9]*\] PyInit__lockgate')" = 1 ] ||
    { echo "$wheel: _lockgate.pyd does not export PyInit__lockgate" >&2; return 1; }
  dlls=$(pe_imports "$pyd")
  if [ -n "$(tr ' ' '\n' <<<"$dlls" | grep -vixE "python3\.dll|$WINDOWS_OWN_DLLS")" ]; then
    echo "$wheel: _lockgate.pyd imports more than python3.dll and Windows' own DLLs: $dlls" >&2
    return 1
  fi
  log "python: $(basename "$wheel"): exports PyInit__lockgate; imports $dlls"
  rm -rf "$dir"
}

# What a musllinux wheel's extension may need: musl itself and nothing else. auditwheel cannot
# say it on a glibc machine (it resolves the extension's `libc.so`, zig's name for musl, to the
# host's glibc linker script and fails), so this reads the ELF's needs with readelf: musl's loader
# serves `libc.so` / `libc.musl-<arch>.so.1` itself (no musl-dev needed on the user's machine).
musl_wheel_check() {
  local wheel=$1 dir needed
  dir=$(mktemp -d "$LG_TMP/musl-wheel.XXXXXX")
  unzip -q "$wheel" 'lockgate/_lockgate*.so' -d "$dir"
  needed=$(readelf -d "$dir"/lockgate/_lockgate*.so | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u | paste -sd' ' -)
  if grep -q 'GLIBC_' <(readelf -V "$dir"/lockgate/_lockgate*.so) ||
    [ -n "$(tr ' ' '\n' <<<"$needed" | grep -vxE 'libc\.so|libc\.musl-(x86_64|aarch64)\.so\.1')" ]; then
    echo "$wheel: needs more than musl: $needed" >&2
    return 1
  fi
  log "python: $(basename "$wheel"): the extension needs only musl ($needed), no glibc symbol versions"
}

# ---- Node ----

package_node() {
  bindings-node/ci.sh install >&2
  bindings-node/ci.sh build >&2
  rm -rf dist/node && mkdir -p dist/node
  (cd bindings-node && npm pack --silent --pack-destination "$LG_ROOT/dist/node" >/dev/null)
  local tgz=dist/node/lockgate-$VERSION.tgz
  [ -f "$tgz" ] || { echo "npm pack made no $tgz" >&2; return 1; }
  local listing
  listing=$(tar -tzf "$tgz")
  for f in package/lib/index.js package/lib/index.mjs package/lib/index.d.ts package/lib/index.d.mts \
    package/lib/peer.js package/pkg/lockgate_node_bg.wasm package/pkg/lockgate_node.js; do
    grep -qx "$f" <<<"$listing" || { echo "$tgz lacks $f" >&2; return 1; }
  done
  log "node: $tgz ($(tar -xzOf "$tgz" package/package.json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("dependencies:", d.get("dependencies", {}), "optional peers:", sorted(d["peerDependencies"]))'))"
}

# ---- JVM ----

package_jvm() {
  ensure_pkg_tools
  bindings-jvm/ci.sh install >&2
  local work=$PKG_WORK/jvm t triple dir file
  local natives=$work/native gen=$work/generated
  rm -rf "$natives" && mkdir -p "$natives"
  for t in "${JVM_TARGETS[@]}"; do
    read -r triple dir file <<<"$t"
    ensure_rust_targets "${triple%.2.17}"
    log "jvm: native library for $dir ($triple)"
    mkdir -p "$natives/$dir"
    if [ "$triple" = "$HOST_TRIPLE" ]; then
      nice cargo build --release -p lockgate-jvm --lib >&2
      cp "target/release/$file" "$natives/$dir/$file"
    elif [ "$triple" = x86_64-pc-windows-gnu ]; then
      # cargo-zigbuild drops rustc's list.def for windows-gnu (zig's linker rejects it), which
      # leaves the DLL with no exports at all; so the exports (uniffi's, the same on every
      # target) are listed from the host library, built first, into a .def of our own.
      local def=$work/lockgate_jvm.def
      { echo "LIBRARY lockgate_jvm.dll"; echo "EXPORTS"
        nm -D --defined-only "$natives/linux-$(uname -m | sed 's/_/-/')/liblockgate_jvm.so" |
          awk '$3 ~ /^(uniffi|ffi)_lockgate_jvm_/ {print "    " $3}'; } > "$def"
      nice cargo-zigbuild rustc --release -p lockgate-jvm --lib --target "$triple" -- -C link-arg="$def" >&2
      cp "target/$triple/release/$file" "$natives/$dir/$file"
      # (the listing read whole: grep -q's early exit would fail objdump under pipefail)
      [ "$(objdump -p "$natives/$dir/$file" | grep -c 'ffi_lockgate_jvm_uniffi_contract_version')" -gt 0 ] ||
        { echo "$natives/$dir/$file exports no uniffi symbols" >&2; return 1; }
    else
      nice cargo zigbuild --release -p lockgate-jvm --lib --target "$triple" >&2
      cp "target/${triple%.2.17}/release/$file" "$natives/$dir/$file"
    fi
  done
  # Kotlin from the host's library (uniffi's library mode reads the exported metadata; it is
  # the same on every target), then the Maven build with those natives as its resources.
  local host_lib
  host_lib=$natives/linux-$(uname -m | sed 's/_/-/')/liblockgate_jvm.so
  rm -rf "$gen" && mkdir -p "$gen"
  cargo run --quiet -p lockgate-jvm-uniffi-bindgen -- generate --library "$host_lib" --language kotlin --out-dir "$gen" --no-format >&2
  # Symbols are not needed at run time (JNA looks up the dynamic ones, which strip keeps);
  # the aarch64 one with Debian's aarch64 binutils, the Windows one (exports kept) with the
  # host's, which reads PE.
  ensure_apt binutils-aarch64-linux-gnu
  for t in "${JVM_TARGETS[@]}"; do
    read -r triple dir file <<<"$t"
    case $triple in
      "$HOST_TRIPLE" | x86_64-pc-windows-gnu) strip --strip-unneeded "$natives/$dir/$file" ;;
      aarch64-*linux-gnu*) aarch64-linux-gnu-strip --strip-unneeded "$natives/$dir/$file" ;;
    esac
  done
  (cd bindings-jvm && mvn -B -ntp -q package -DskipTests -Dlockgate.native.skip=true \
    -Dlockgate.generated="$gen" -Dlockgate.native="$natives" >&2)
  rm -rf dist/jvm && mkdir -p dist/jvm
  local base=dist/jvm/lockgate-$VERSION
  cp "bindings-jvm/target/lockgate-$VERSION.jar" "$base.jar"
  cp bindings-jvm/pom.xml "$base.pom"
  # The sources jar: the Java API and the Kotlin it is built on (the generated bindings too).
  rm -rf "$work/sources" && mkdir -p "$work/sources"
  cp -r bindings-jvm/src/main/java/. bindings-jvm/src/main/kotlin/. "$gen/." "$work/sources/"
  (cd "$work/sources" && jar --create --file "$LG_ROOT/$base-sources.jar" .)
  jvm_javadoc "$work" "$base-javadoc.jar"
  jvm_all_jar "$work" "$base.jar" "dist/jvm/lockgate-all-$VERSION.jar"
  # The Maven repository a user's project resolves io.lockgate:lockgate from (one <dependency>).
  mvn -B -ntp -q org.apache.maven.plugins:maven-install-plugin:3.1.3:install-file \
    -Dfile="$base.jar" -DpomFile="$base.pom" -Dsources="$base-sources.jar" -Djavadoc="$base-javadoc.jar" \
    -DlocalRepositoryPath="$LG_ROOT/dist/jvm/m2" >&2
  local listing
  listing=$(unzip -Z1 "$base.jar")
  for t in "${JVM_TARGETS[@]}"; do
    read -r triple dir file <<<"$t"
    grep -qx "$dir/$file" <<<"$listing" || { echo "$base.jar lacks $dir/$file" >&2; return 1; }
  done
  log "jvm: $base.jar holds $(grep -E '^(linux|win32|darwin)-' <<<"$listing" | grep -v '/$' | tr '\n' ' ')"
}

# The runtime classpath of the jar (kotlin-stdlib, coroutines, JNA, slf4j-api) from ~/.m2.
jvm_runtime_classpath() {
  local out=$1/runtime-classpath.txt
  (cd bindings-jvm && mvn -B -ntp -q dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$out" >&2)
  cat "$out"
}

# Javadoc of the public Java API (io.lockgate). Every doclint warning fails the build: broken
# references, HTML, syntax, a public item without a doc comment, a missing @param, @return or
# @throws.
jvm_javadoc() {
  local work=$1 jar=$2 cp out
  cp=$(jvm_runtime_classpath "$work"):bindings-jvm/target/classes
  rm -rf "$work/javadoc" && mkdir -p "$work/javadoc"
  out=$(javadoc -quiet -Xmaxwarns 100000 -Xdoclint:all -Werror -encoding UTF-8 --release 17 -d "$work/javadoc" -classpath "$cp" \
    -sourcepath bindings-jvm/src/main/java -subpackages io.lockgate -windowtitle "lockgate $VERSION" 2>&1) ||
    { echo "$out" >&2; echo "javadoc: warnings or errors (above)" >&2; return 1; }
  log "javadoc: no warnings"
  (cd "$work/javadoc" && jar --create --file "$(abspath "$jar")" .)
  rm -rf dist/docs/java && mkdir -p dist/docs && cp -r "$work/javadoc" dist/docs/java
}

# One jar with lockgate and its runtime dependencies, for `java -cp lockgate-all.jar`.
jvm_all_jar() {
  local work=$1 jar=$2 out=$3 d
  local tree=$work/all
  rm -rf "$tree" && mkdir -p "$tree"
  for d in $(jvm_runtime_classpath "$work" | tr ':' ' ') "$jar"; do
    (cd "$tree" && unzip -qo "$(abspath "$d")" -x 'META-INF/*.SF' 'META-INF/*.RSA' 'META-INF/*.DSA' 'META-INF/MANIFEST.MF' 'module-info.class' 'META-INF/versions/*/module-info.class' 2>&1 |
      { grep -v '^caution: excluded filename not matched' >&2 || true; })
  done
  (cd "$tree" && jar --create --file "$(abspath "$out")" .)
}

# ---- the lockgate command ----

# dist/cli/lockgate-V-<arch>-linux: static (no dynamic section, no interpreter), stripped.
package_cli() {
  ensure_pkg_tools
  ensure_apt binutils-aarch64-linux-gnu
  local t triple name out
  rm -rf dist/cli && mkdir -p dist/cli
  for t in "${CLI_TARGETS[@]}"; do
    read -r triple name <<<"$t"
    ensure_rust_targets "$triple"
    log "cli: lockgate for $triple (cargo zigbuild)"
    nice cargo zigbuild --release -p lockgate-cli --bin lockgate --target "$triple" >&2
    out=dist/cli/$name
    case $triple in
      *-windows-*)
        cp "target/$triple/release/lockgate.exe" "$out"
        strip "$out" # the host's strip reads PE
        cli_check_windows "$out"
        continue
        ;;
      x86_64-*) cp "target/$triple/release/lockgate" "$out"; strip "$out" ;;
      aarch64-*) cp "target/$triple/release/lockgate" "$out"; aarch64-linux-gnu-strip "$out" ;;
    esac
    cli_check_static "$out" "$triple"
  done
}

# lockgate.exe: an x86-64 console program that imports Windows' own DLLs only (no MinGW runtime
# DLL such as libgcc_s_seh-1.dll or libwinpthread-1.dll beside it).
cli_check_windows() {
  local exe=$1 dlls
  file -b "$exe" | grep -q 'PE32+ executable (console) x86-64' || { echo "$exe is not an x86-64 console program: $(file -b "$exe")" >&2; return 1; }
  dlls=$(pe_imports "$exe")
  if [ -n "$(tr ' ' '\n' <<<"$dlls" | grep -vixE "$WINDOWS_OWN_DLLS")" ]; then
    echo "$exe imports more than Windows' own DLLs: $dlls" >&2
    return 1
  fi
  log "cli: $(basename "$exe"): $(file -b "$exe" | cut -d, -f1), $(stat -c %s "$exe") bytes; imports $dlls"
}

# A binary that runs on any Linux of its architecture: no NEEDED libraries, no ELF interpreter.
cli_check_static() {
  local bin=$1 triple=$2 arch
  case $triple in x86_64-*) arch=x86-64 ;; aarch64-*) arch=aarch64 ;; esac
  file -b "$bin" | grep -q "$arch" || { echo "$bin is not $arch: $(file -b "$bin")" >&2; return 1; }
  local dynamic program
  dynamic=$(readelf -d "$bin" 2>&1) program=$(readelf -l "$bin")
  if grep -q '(NEEDED)' <<<"$dynamic" || grep -q 'Requesting program interpreter' <<<"$program"; then
    echo "$bin is not static:" >&2; readelf -d "$bin" >&2; return 1
  fi
  log "cli: $(basename "$bin"): static ($(file -b "$bin" | cut -d, -f1-2)), $(stat -c %s "$bin") bytes"
}

# ---- API references ----

package_docs() {
  ensure_pkg_tools
  mkdir -p dist/docs
  log "docs: rustdoc for lockgate-core (missing docs and every rustdoc warning are errors)"
  rustdoc_core >&2
  rm -rf dist/docs/rust && cp -r target/doc dist/docs/rust
  log "docs: Python (pdoc, from the docstrings and .pyi stubs of the host wheel)"
  local site=$PKG_WORK/pdoc-site wheel
  wheel=$(host_wheel)
  rm -rf "$site" && "$PKG_TOOLS/bin/pip" install -q --disable-pip-version-check --no-deps --target "$site" "$wheel"
  rm -rf dist/docs/python
  PYTHONPATH=$site "$PKG_TOOLS/bin/python" -W error -m pdoc -o dist/docs/python lockgate >&2
  log "docs: TypeScript (typedoc, from lib/index.d.ts; warnings and undocumented exports are errors)"
  # lib/transport/types.d.ts (every transport's types) is written by the Node build.
  [ -f bindings-node/lib/transport/types.d.ts ] || bindings-node/ci.sh build >&2
  local npm_tools=$PKG_WORK/npm-tools
  [ -x "$npm_tools/node_modules/.bin/typedoc" ] ||
    npm install --silent --no-audit --no-fund --prefix "$npm_tools" typedoc@0.28 typescript@5.9 >&2
  rm -rf dist/docs/node
  # --disableSources: typedoc links each item to its source on the clone's git host, and warns
  # (an error here) when the clone's origin is none it knows (a local path, no remote at all).
  (cd bindings-node && "$npm_tools/node_modules/.bin/typedoc" --treatWarningsAsErrors --validation.notDocumented --disableSources --out "$LG_ROOT/dist/docs/node" \
    --name "lockgate $VERSION" --tsconfig "$LG_ROOT/packaging/typedoc.tsconfig.json" lib/index.d.ts >&2)
  log "docs: javadoc (built with the jar: dist/docs/java)"
  [ -f dist/docs/java/index.html ] || package_jvm
}

# The wheel of this machine's platform in dist/python.
host_wheel() {
  local arch
  arch=$(uname -m)
  ls "$DIST"/python/lockgate-"$VERSION"-cp39-abi3-*linux*_"$arch".whl 2>/dev/null | grep -v musllinux | head -1 | grep . ||
    { echo "no $arch glibc wheel in $DIST/python: ./run package python" >&2; return 1; }
}

# ---- the host's artifacts only, for ./run test's packaging suite ----

# Into $DIST (target/packaging/host-dist): the host's wheel (maturin, no zig), the npm tarball
# and the jar (the Node and JVM suites built the wasm and the jar just before) with its POM in a
# Maven repository, and the self-contained jar. Minutes, not the cross builds of ./run package.
package_host() {
  rm -rf "$DIST" && mkdir -p "$DIST/python" "$DIST/node" "$DIST/jvm"
  log "packaging: the host wheel (maturin build --release)"
  python3 -m maturin build --release -m bindings-python/Cargo.toml -o "$DIST/python" >&2
  [ -f bindings-node/pkg/lockgate_node_bg.wasm ] || bindings-node/ci.sh build >&2
  (cd bindings-node && npm pack --silent --pack-destination "$DIST/node" >/dev/null)
  local jar=bindings-jvm/target/lockgate-$VERSION.jar work=$PKG_WORK/host-jvm
  [ -f "$jar" ] || (cd bindings-jvm && mvn -B -ntp -q package -DskipTests >&2)
  mkdir -p "$work"
  cp "$jar" "$DIST/jvm/lockgate-$VERSION.jar"
  cp bindings-jvm/pom.xml "$DIST/jvm/lockgate-$VERSION.pom"
  mvn -B -ntp -q org.apache.maven.plugins:maven-install-plugin:3.1.3:install-file \
    -Dfile="$DIST/jvm/lockgate-$VERSION.jar" -DpomFile="$DIST/jvm/lockgate-$VERSION.pom" \
    -DlocalRepositoryPath="$DIST/jvm/m2" >&2
  jvm_all_jar "$work" "$DIST/jvm/lockgate-$VERSION.jar" "$DIST/jvm/lockgate-all-$VERSION.jar"
}

# ---- sizes ----

package_sizes() {
  ensure_pkg_tools
  local out=dist/SIZES.md
  log "sizes: the Python extension for Redis only beside every backend (host, release)"
  local redis_only all tmp=$PKG_WORK/size-wheels
  rm -rf "$tmp" && mkdir -p "$tmp/redis" "$tmp/all"
  nice maturin build --release --zig --compatibility manylinux2014 --target "$HOST_TRIPLE" -m bindings-python/Cargo.toml -o "$tmp/redis" \
    --no-default-features --features redis >&2
  redis_only=$(ls "$tmp"/redis/*.whl)
  all=$(host_wheel)
  {
    echo "# Artifact sizes (lockgate $VERSION, \`./run package\` on $(date -u +%Y-%m-%d))"
    echo
    echo "| artifact | bytes | MiB |"
    echo "|---|---:|---:|"
    find dist -maxdepth 2 -type f ! -name SIZES.md ! -path 'dist/docs/*' ! -path 'dist/jvm/m2/*' -printf '%s %p\n' | sort -k2 |
      awk '{printf "| `%s` | %d | %.1f |\n", $2, $1, $1 / 1048576}'
    echo
    echo "## Redis only vs every backend (cargo features)"
    echo
    echo "The bindings pass \`lockgate-core\`'s backend features through (\`--no-default-features --features redis\`);"
    echo "a Redis-only build carries none of the other backends' client crates."
    echo
    echo "| host manylinux wheel | wheel bytes | extension bytes | client crates in the build |"
    echo "|---|---:|---:|---|"
    local w ext crates
    for w in "$redis_only" "$all"; do
      ext=$(unzip -l "$w" | awk '/_lockgate.*\.so$/ {print $1}')
      if [ "$w" = "$redis_only" ]; then
        crates=$(cargo tree -q -p lockgate-python --no-default-features --features redis -e normal --prefix none | backend_crates)
        echo "| Redis only (\`--no-default-features --features redis\`) | $(stat -c %s "$w") | $ext | $crates |"
      else
        crates=$(cargo tree -q -p lockgate-python -e normal --prefix none | backend_crates)
        echo "| every backend (default) | $(stat -c %s "$w") | $ext | $crates |"
      fi
    done
  } > "$out"
  log "sizes: wrote $out"
}

# Which backends' client crates a `cargo tree` listing holds.
backend_crates() {
  sort -u | awk '{print $1}' | grep -xE 'redis|zookeeper-client|etcd-client|tokio-postgres|sqlx' | sort -u | paste -sd, - | sed 's/,/, /g'
}
