#!/usr/bin/env bash
# On the GPU machine: build the C++ example (examples/cpp), export a bundle
# with Python (cutecall.export of examples.kernels.vector_add), run the
# example on it in a clean environment (no Python variables, no Python on
# the path), and print `ldd` of the binary.
#
#   run(command="bash tools/gpu/setup.sh && . /tmp/site/env.sh && bash tools/gpu/cpp_example.sh 2>&1 | tee $OUT/cpp_example.log",
#       carry=[".whl/part2"])      # after tools/gpu/stage1.sh, see README.md
#
# Environment overrides: PYTHON (python3), CUTECALL_EXAMPLE_BUILD
# (/tmp/cutecall_example), CUTECALL_EXAMPLE_BUNDLE (/tmp/cutecall_bundle),
# CUTECALL_EXAMPLE_N (1000003).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-python3}"
BUILD="${CUTECALL_EXAMPLE_BUILD:-/tmp/cutecall_example}"
BUNDLE="${CUTECALL_EXAMPLE_BUNDLE:-/tmp/cutecall_bundle}"
N="${CUTECALL_EXAMPLE_N:-1000003}"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

echo "== build examples/cpp"
cmake -S "$repo/examples/cpp" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD.cmake.log" 2>&1 \
  || { cat "$BUILD.cmake.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)"

echo "== export the bundle (Python, once)"
DIGEST="$("$PY" - "$BUNDLE" <<'EOF'
import sys
import jax, jax.numpy as jnp
import cutecall
from cutecall.examples import kernels

# A symbolic length: the entry serves every n (a concrete 4096 would compile
# n's divisibility class, 16, in, and n = 1000003 would be refused).
s = jax.ShapeDtypeStruct(jax.export.symbolic_shape("n"), jnp.float32)
add = cutecall.compile(kernels.vector_add, s, s, output_shape_dtype=lambda a, b: a)
print(cutecall.export(sys.argv[1], {"vector_add": add}, overwrite=True))
EOF
)"
RUNTIME="$("$PY" -c 'from cutecall._driver import runtime; print(runtime.find_runtime_library() or "")')"
[ -n "$RUNTIME" ] || { echo "libcute_dsl_runtime.so not found"; exit 1; }
echo "bundle:  $BUNDLE (manifest-sha256 $DIGEST)"
echo "runtime: $RUNTIME"
grep -v '^jax ' "$BUNDLE/manifest.txt" | head -20

echo "== run (clean environment: no PYTHONPATH, no python on PATH)"
env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" \
  "$BUILD/run_bundle" "$BUNDLE" --kernel vector_add --n "$N" \
  --runtime "$RUNTIME" --digest "$DIGEST"

echo "== a tampered object is refused (expect FAIL naming the file)"
tampered="$BUNDLE.tampered"
rm -rf "$tampered" && cp -r "$BUNDLE" "$tampered"
obj="$(ls "$tampered"/objects/*.o | head -1)"
"$PY" -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0xFF; open(p, "wb").write(b)' "$obj"
if env -i PATH=/usr/bin:/bin "$BUILD/run_bundle" "$tampered" --runtime "$RUNTIME"; then
  echo "tampered bundle was NOT refused"; exit 1
fi
rm -rf "$tampered"

echo "== ldd $BUILD/run_bundle"
ldd "$BUILD/run_bundle"
if ldd "$BUILD/run_bundle" | grep -qi python; then
  echo "the example links Python"; exit 1
fi
echo "== cpp_example.sh: PASS"
