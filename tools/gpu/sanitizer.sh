# Sourced by the memcheck scripts (device machine, after setup.sh): the
# installed site's environment, SAN, the compute-sanitizer to run, and
# MEMCHECK, its memcheck command; and the environment every sanitized run
# gets.
# Memory-access errors in a sanitizer log, by the report's first line:
MEMORY_ERRORS='^========= (Invalid|Out-of-range|Misaligned|Malloc|Hardware exception)'
. /tmp/site/env.sh
export PATH="$PATH:/usr/local/cuda/bin"
SAN="$(command -v compute-sanitizer || ls /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)"
[ -n "$SAN" ] || { echo "compute-sanitizer not found"; exit 2; }
"$SAN" --version | tail -1
# memcheck as every script runs it: no leak report, at most 50 errors printed.
MEMCHECK=("$SAN" --tool memcheck --leak-check no --print-limit 50)
# JAX and torch allocate each buffer with its own cudaMalloc, so an access
# past a buffer's end is past an allocation, which memcheck sees (a pooling
# allocator would hide it inside the pool). Output unbuffered, and a crash
# in a Python target prints its Python stack.
export XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
