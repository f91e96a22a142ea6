# Sourced by the memcheck scripts (device machine, after setup.sh): the
# installed site's environment, SAN, the compute-sanitizer to run, and
# MEMCHECK, its memcheck command.
# Memory-access errors in a sanitizer log, by the report's first line:
MEMORY_ERRORS='^========= (Invalid|Out-of-range|Misaligned|Malloc|Hardware exception)'
. /tmp/site/env.sh
export PATH="$PATH:/usr/local/cuda/bin"
SAN="$(command -v compute-sanitizer || ls /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)"
[ -n "$SAN" ] || { echo "compute-sanitizer not found"; exit 2; }
"$SAN" --version | tail -1
# memcheck as every script runs it: no leak report, at most 50 errors printed.
MEMCHECK=("$SAN" --tool memcheck --leak-check no --print-limit 50)
