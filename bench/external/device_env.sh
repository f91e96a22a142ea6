# Sourced by bench/external's device scripts: the variables every one of
# them sets, and the site check. After `. device_env.sh NAME CAP_DEFAULT
# CAP_VALUE`:
#   repo  the checkout;  out  $OUT/NAME (made);  site  CUTECALL_SITE
#   (/tmp/site);  py  PYTHON (python3);  cap  CAP_VALUE, else CAP_DEFAULT;
#   t0  $SECONDS at the start; CUDA_VISIBLE_DEVICES (default 0),
#   XLA_PYTHON_CLIENT_PREALLOCATE=false and PYTHONUNBUFFERED=1 exported.
# `use_site` checks that `bash tools/gpu/gpu setup` made the site and
# sources its env.sh (exit 2 if not).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-/tmp/cutecall_out}/$1"
site="${CUTECALL_SITE:-/tmp/site}"
py="${PYTHON:-python3}"
cap="${3:-$2}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
t0=$SECONDS
mkdir -p "$out"

use_site() {
  [ -f "$site/env.sh" ] || { echo "no $site/env.sh: run 'bash tools/gpu/gpu setup' first" >&2; exit 2; }
  # shellcheck disable=SC1091
  . "$site/env.sh"
}
