#!/usr/bin/env bash
# Build bench/overhead/handwritten_ffi.cu into a shared library exporting the
# handlers HandwrittenEmpty, HandwrittenEmptyNoGraph and HandwrittenEmptyEx
# (checked with nm after the build).
#
#   bench/overhead/build_handler.sh [OUTPUT.so]
#
# OUTPUT defaults to $CUTECALL_HANDWRITTEN_SO, else /tmp/cutecall_bench/libhandwritten_ffi.so.
# Needs nvcc (CUDA 12.x/13.x) and a Python with jax (for the XLA FFI headers);
# set PYTHON to choose the interpreter, XLA_FFI_INCLUDE_DIR to skip asking jax.
# Compiles for Hopper only: -gencode=arch=compute_90a,code=sm_90a.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-${CUTECALL_HANDWRITTEN_SO:-/tmp/cutecall_bench/libhandwritten_ffi.so}}"
python="${PYTHON:-python3}"
nvcc="${NVCC:-nvcc}"
if ! command -v "$nvcc" >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc=/usr/local/cuda/bin/nvcc
fi

inc="${XLA_FFI_INCLUDE_DIR:-$("$python" -c 'import jax; print(jax.ffi.include_dir())')}"
if [ ! -f "$inc/xla/ffi/api/ffi.h" ]; then
  echo "build_handler.sh: no xla/ffi/api/ffi.h under '$inc'" >&2
  exit 1
fi

mkdir -p "$(dirname "$out")"
set -x
"$nvcc" -O3 -std=c++17 -shared -Xcompiler -fPIC,-Wno-return-type \
  -diag-suppress 940,2473 \
  -gencode=arch=compute_90a,code=sm_90a \
  -I"$inc" "$here/handwritten_ffi.cu" -o "$out"
{ set +x; } 2>/dev/null
for sym in HandwrittenEmpty HandwrittenEmptyNoGraph HandwrittenEmptyEx; do
  if ! nm -D --defined-only "$out" | grep -qw "$sym"; then
    echo "build_handler.sh: $out does not export $sym" >&2
    exit 1
  fi
done
echo "built $out"
