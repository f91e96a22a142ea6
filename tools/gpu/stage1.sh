#!/usr/bin/env bash
# Device call 1 of 2: park the first chunk of the cu13 wheel in /tmp.
#
#   run(command="bash tools/gpu/stage1.sh", carry=[".whl/part1"])
#
# Copies .whl/part1/* to /tmp/cutecall_stage/ (override: CUTECALL_STAGE) and
# checks the chunk's sha256. /tmp survives only while the machine stays warm
# (~30 s after a call returns), so device call 2 (`bash tools/gpu/gpu setup`,
# carrying .whl/part2) must start right after this one. See tools/gpu/README.md.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src="$repo/.whl/part1"
dst="${CUTECALL_STAGE:-/tmp/cutecall_stage}"

if ! compgen -G "$src/*.chunk0" >/dev/null; then
  echo "stage1.sh: ERROR: no $src/*.chunk0 here." >&2
  echo "  Run tools/gpu/fetch_wheels.sh on the dev machine, then call with carry=[\".whl/part1\"]." >&2
  exit 1
fi

mkdir -p "$dst"
cp -f "$src"/* "$dst"/
(cd "$dst" && sha256sum -c --quiet SHA256SUMS.part1)
date +%s >"$dst/STAGED_AT"
ls -l "$dst"
echo "stage1: OK, staged in $dst. Start device call 2 (bash tools/gpu/gpu setup, carry .whl/part2) NOW."
