#!/usr/bin/env bash
# Prints a Python >= 3.10 interpreter for the project's environment,
# preferring 3.12 (what the GPU machines run, and jax 0.11's minimum).
# Order: $PYTHON, python3.12 on PATH, a pyenv-installed 3.12/3.13, python3.
set -euo pipefail
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1; }
candidates=()
[[ -n "${PYTHON:-}" ]] && candidates+=("$PYTHON")
candidates+=(python3.12)
for root in "${PYENV_ROOT:-$HOME/.pyenv}/versions"/3.12* "${PYENV_ROOT:-$HOME/.pyenv}/versions"/3.13*; do
  [[ -x "$root/bin/python3" ]] && candidates+=("$root/bin/python3")
done
candidates+=(python3.13 python3)
for c in "${candidates[@]}"; do
  if ok "$c"; then command -v "$c" 2>/dev/null || echo "$c"; exit 0; fi
done
echo "no Python >= 3.10 found; set PYTHON=/path/to/python3" >&2
exit 1
