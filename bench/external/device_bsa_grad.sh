#!/usr/bin/env bash
# cuDNN's sm90 block-sparse attention, forward and backward: cutecall's JAX
# path (block_sparse_attention, its jax.grad) against cuDNN's torch path at
# tests/external/corpus/cudnn_bsa_corpus.py SHAPES['bench'], on ONE GPU, in a
# fresh process (bench/external/bsa_grad.py). Run after `bash tools/gpu/gpu setup`:
#
#   CUDA_VISIBLE_DEVICES=0 bash bench/external/device_bsa_grad.sh
#   bash bench/external/device_bsa_grad.sh --dry-run     # here, on the CPU
#
# Writes $OUT/bsa_grad/{bsa_grad.json,bsa_grad.log} and prints the table.
# Hard wall-time cap: BSA_CAP seconds (default 120). Environment: OUT
# (/tmp/cutecall_out), CUTECALL_SITE (/tmp/site), PYTHON (python3).
# shellcheck source=bench/external/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh" bsa_grad 120 "${BSA_CAP:-}"


if [ "${1:-}" = "--dry-run" ]; then
  JAX_PLATFORMS=cpu timeout -k 5 "$cap" "$py" "$repo/bench/external/bsa_grad.py" \
    --dry-run --out "$out" 2>&1 | tee "$out/bsa_grad.log" | grep -v Warning
  rc=${PIPESTATUS[0]}
  echo "== bsa_grad dry run: $((SECONDS - t0)) s, rc $rc"
  exit "$rc"
fi

use_site
# shellcheck disable=SC2086  # BSA_ARGS: extra options, e.g. --profile
timeout -k 5 "$cap" "$py" "$repo/bench/external/bsa_grad.py" --out "$out" ${BSA_ARGS:-} \
  >"$out/bsa_grad.log" 2>&1
rc=$?
grep -v -E 'Warning|warn\(' "$out/bsa_grad.log" | tail -n 14
[ "$rc" = 124 ] && echo "== bsa_grad: hit the ${cap} s cap"
echo "== bsa_grad: $((SECONDS - t0)) s, rc $rc; files in $out"
exit "$rc"
