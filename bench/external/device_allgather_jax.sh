#!/usr/bin/env bash
# QuACK's all-gather GEMM kernel across GPUs from JAX (bench/external/
# allgather_jax.py: XLA's all-gather, then the kernel per device through
# cutecall's JAX front), one process over the GPUs CUDA_VISIBLE_DEVICES
# names (set it: default here 0,1). Run after `bash tools/gpu/gpu setup`:
#
#   CUDA_VISIBLE_DEVICES=0,1,2,3 bash bench/external/device_allgather_jax.sh
#   bash bench/external/device_allgather_jax.sh --dry-run   # here: 2 CPU devices
#
# Writes $OUT/allgather_jax/{allgather_jax.json,allgather_jax.log}. Hard
# wall-time cap: AGJ_CAP seconds (default 150).
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1}"
# shellcheck source=bench/external/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh" allgather_jax 150 "${AGJ_CAP:-}"

if [ "${1:-}" = "--dry-run" ]; then
  JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=2 QUACK_ARCH=sm_90 \
    timeout -k 5 "$cap" "$py" "$repo/bench/external/allgather_jax.py" --dry-run --out "$out"
  exit $?
fi

use_site
NCCL_NVLS_ENABLE=0 timeout -k 5 "$cap" "$py" "$repo/bench/external/allgather_jax.py" \
  --out "$out" >"$out/allgather_jax.log" 2>&1
rc=$?
grep -v -E 'Warning|warn\(' "$out/allgather_jax.log" | tail -n 5
[ "$rc" = 124 ] && echo "== allgather_jax: hit the ${cap} s cap"
echo "== allgather_jax: $((SECONDS - t0)) s, rc $rc; files in $out"
exit "$rc"
