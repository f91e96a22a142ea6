#!/usr/bin/env bash
# Prints a Python interpreter for the project's environment.
#   tools/find_python.sh         a Python >= 3.10, preferring 3.12 (what the
#                                GPU machines run, and jax 0.11's minimum)
#   tools/find_python.sh 3.10    exactly that minor version (CI's matrix)
# Order: $PYTHON (no argument only), pythonX.Y on PATH, a pyenv-installed
# X.Y, then python3.
set -euo pipefail
want="${1:-}"
ok() {
  if [[ -n "$want" ]]; then
    "$1" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$want' else 1)" >/dev/null 2>&1
  else
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1
  fi
}
candidates=()
[[ -z "$want" && -n "${PYTHON:-}" ]] && candidates+=("$PYTHON")
for v in ${want:-3.12 3.13}; do
  candidates+=("python$v")
  for root in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v"*; do
    [[ -x "$root/bin/python3" ]] && candidates+=("$root/bin/python3")
  done
done
candidates+=(python3)
for c in "${candidates[@]}"; do
  if ok "$c"; then command -v "$c" 2>/dev/null || echo "$c"; exit 0; fi
done
echo "no Python ${want:->= 3.10} found; set PYTHON=/path/to/python3 or install it (pyenv install $want)" >&2
exit 1
