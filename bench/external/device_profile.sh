#!/usr/bin/env bash
# Issue 37 section 2 on the GPU machine: where the JAX front's time goes on
# the small kernels (bench/external/jax_profile.py), ONE GPU. Run after
# `bash tools/gpu/gpu setup`:
#
#   CUDA_VISIBLE_DEVICES=0 bash bench/external/device_profile.sh
#
# Writes $OUT/jaxprof/{jaxprof.json,jaxprof.md,jaxprof.log}. Hard wall-time
# cap: JAXPROF_CAP seconds (default 240) for everything; cases that would
# start after JAXPROF_CAP - 60 s are skipped, and jaxprof.json is rewritten
# after each case, so a cut-off run still brings back what it measured.
# Environment: OUT (/tmp/cutecall_out), CUTECALL_SITE (/tmp/site), PYTHON
# (python3), JAXPROF_ARGS (extra jax_profile.py args, e.g. "--static
# --torch-front" or "--cases fa4.fwd_combine").
# shellcheck source=bench/external/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh" jaxprof 240 "${JAXPROF_CAP:-}"


use_site
# shellcheck disable=SC2086  # JAXPROF_ARGS: words
timeout -k 5 "$((cap - 10))" "$py" "$repo/bench/external/jax_profile.py" --out "$out" \
  --budget "$((cap - 60))" ${JAXPROF_ARGS:-} >"$out/jaxprof.log" 2>&1
rc=$?
[ "$rc" = 124 ] && echo "== jax_profile.py cut off at $((cap - 10)) s (jaxprof.json holds the cases done)"
if [ ! -s "$out/jaxprof.md" ] && [ -s "$out/jaxprof.json" ]; then
  timeout 5 "$py" "$repo/bench/external/profile_report.py" "$out/jaxprof.json" >"$out/jaxprof.md"
fi
grep -E '^(==|[A-Za-z_.]+(Error|Exception))' "$out/jaxprof.log" | tail -n 20
sed -n '/^| kernel/,/^$/p' "$out/jaxprof.md" 2>/dev/null
echo "== jaxprof: $((SECONDS - t0)) s, rc $rc; files in $out"
exit $rc
