#!/usr/bin/env bash
# The C++ package of an installed cutecall, used the way a C++ project uses
# it (issue 38): in VENV (a fresh venv holding the wheel and the DSL),
#   1. `cutecall export` writes a bundle and its typed header (CPU: the
#      kernels compile for sm_90a);
#   2. examples/cpp/installed, a separate CMake project, finds the package
#      with find_package(cutecall) and -Dcutecall_DIR="$(cutecall --cmakedir)"
#      and builds a C++ program against the header and a C program against
#      cutecall_c.h (with cc);
#   3. both open the bundle without loading (no GPU) and list its entries,
#      and check the runtime checks (a broken dims= tie, a wrong arity);
#   4. each wrong_call_<kind> (a generated function called with a wrong
#      dtype, rank, arity) must fail to compile.
#
#   tools/ci/cpp_consumer.sh VENV [WORK_DIR]     (install_matrix.sh runs it)
set -euo pipefail
venv="$(cd "$1" && pwd)"
cd "$(dirname "$0")/../.."
work="${2:-$PWD/build/ci/cpp_consumer}"
rm -rf "$work" && mkdir -p "$work/gen"

echo "== export (CPU) with the header"
"$venv/bin/cutecall" export "$work/kernels.bundle" examples/cpp/installed/kernels_source.py \
  --header "$work/gen/kernels.h"
cmakedir="$("$venv/bin/cutecall" --cmakedir)"
echo "cutecall --cmakedir: $cmakedir"
[ "$("$venv/bin/python" -m cutecall --cmakedir)" = "$cmakedir" ]

echo "== configure and build examples/cpp/installed"
cmake -S examples/cpp/installed -B "$work/build" -Dcutecall_DIR="$cmakedir" \
  -DKERNELS_HEADER_DIR="$work/gen" -DCMAKE_BUILD_TYPE=Release
cmake --build "$work/build" -j "${JOBS:-2}"

echo "== run (no GPU: open, list, check)"
"$work/build/typed_main" "$work/kernels.bundle" --list | tee "$work/typed.out"
"$work/build/c_main" "$work/kernels.bundle" --list | tee "$work/c.out"
for f in typed c; do
  grep -q "entry vector_add" "$work/$f.out" && grep -q "entry affine" "$work/$f.out" ||
    { echo "$f program did not list both entries"; exit 1; }
done

echo "== wrong calls of a generated function do not compile"
for kind in dtype rank arity; do
  if cmake --build "$work/build" --target "wrong_call_$kind" > "$work/wrong_$kind.log" 2>&1; then
    echo "wrong_call_$kind COMPILED: a $kind mismatch was not caught"; exit 1
  fi
  grep -Eq "TensorRef|cudaStream_t|CUstream_st" "$work/wrong_$kind.log" ||
    { cat "$work/wrong_$kind.log"; echo "wrong_call_$kind failed for another reason"; exit 1; }
  echo "wrong_call_$kind: refused ($(grep -m1 -o 'error: .*' "$work/wrong_$kind.log" | cut -c1-120))"
done
echo "cpp consumer: PASS"
