#!/usr/bin/env bash
# The torch front's gap on issue 37's two large GEMMs (QuACK's all-gather
# GEMM, the CUTLASS Operator API's sm90 GEMM): bench/external/gemm_gap.py,
# one process per family on ONE GPU (compiles at once, timing in turns
# under a lock), every path from the same GPU state (rotated order, rest,
# cold and hot), torch.profiler's kernels, and an nvidia-smi clock/power
# log of the whole run. Run after `bash tools/gpu/gpu setup`:
#
#   CUDA_VISIBLE_DEVICES=0 bash bench/external/device_gemm_gap.sh
#
#   GAP_MULTI_GPUS=2,3 ... (also: QuACK's all-gather GEMM across GPUs 2 and 3)
#
# Writes $OUT/gemm_gap/{gap_<family>.json,<family>.log,clocks.csv} and, with
# GAP_MULTI_GPUS, allgather_multi.{json,log}.
# Hard wall-time cap: GAP_CAP seconds (default 200) for everything.
# Environment: OUT (/tmp/cutecall_out), CUTECALL_SITE (/tmp/site), PYTHON
# (python3), GAP_FAMILIES (allgather cutlass_operators), GAP_ARGS (extra
# gemm_gap.py args), GAP_MULTI_GPUS (none), GAP_MULTI_ARGS (extra
# allgather_multi.py args).
# shellcheck source=bench/external/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh" gemm_gap 200 "${GAP_CAP:-}"

families="${GAP_FAMILIES:-allgather cutlass_operators}"

use_site
lock="$(mktemp /tmp/gemm_gap.lock.XXXXXX)"
# The SM clock, power and temperature every 100 ms while the run lasts.
gpu_index="${CUDA_VISIBLE_DEVICES%%,*}"
timeout "$cap" nvidia-smi -i "$gpu_index" --format=csv -lms 100 \
  --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu >"$out/clocks.csv" 2>&1 &
smi=$!
work=$((cap - 10))
pids=()
for fam in $families; do
  # shellcheck disable=SC2086  # GAP_ARGS: words
  timeout -k 5 "$work" "$py" "$repo/bench/external/gemm_gap.py" --family "$fam" \
    --out "$out" --lock "$lock" ${GAP_ARGS:-} >"$out/$fam.log" 2>&1 &
  pids+=($!)
done
# QuACK's all-gather GEMM across GPUs (opt-in: GAP_MULTI_GPUS, e.g. "2,3"
# or "0,1,2,3"), one torchrun process per GPU, beside the timing above.
multi="${GAP_MULTI_GPUS:-}"
if [ -n "$multi" ]; then
  nproc=$(($(tr -cd ',' <<<"$multi" | wc -c) + 1))
  # shellcheck disable=SC2086  # GAP_MULTI_ARGS: words
  (cd "$repo" && CUDA_VISIBLE_DEVICES="$multi" NCCL_NVLS_ENABLE=0 \
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    timeout -k 5 "$work" "$py" -m torch.distributed.run --standalone \
    --nproc-per-node "$nproc" bench/external/allgather_multi.py --out "$out" \
    ${GAP_MULTI_ARGS:-} >"$out/allgather_multi.log" 2>&1) &
  mpid=$!
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
if [ -n "$multi" ]; then
  wait "$mpid" || rc=1
  echo "-- allgather across GPUs $multi:"; grep -E '^rank ' "$out/allgather_multi.log" | cut -c1-400
  grep -E '^[A-Za-z_.]+(Error|Exception)' "$out/allgather_multi.log" | sort | uniq -c | tail -n 3
fi
kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
rm -f "$lock"
for fam in $families; do
  echo "-- $fam:"; grep -E '^(== |   [a-z])' "$out/$fam.log" | cut -c1-300
  grep -q Traceback "$out/$fam.log" && grep -E '^[A-Za-z_.]+(Error|Exception)' "$out/$fam.log" | tail -n 3
done
echo "== clocks: $(($(wc -l <"$out/clocks.csv") - 1)) samples; SM MHz min/max:" \
  "$(awk -F', ' 'NR>1 && $2+0>0 {v=$2+0; if(!n||v<lo)lo=v; if(v>hi)hi=v; n++} END{print lo"/"hi}' "$out/clocks.csv")"
echo "== gemm_gap: $((SECONDS - t0)) s, rc $rc; files in $out"
exit $rc
