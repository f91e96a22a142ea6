#!/usr/bin/env bash
# Issue 36 on a 4-GPU host, in one device call with a hard wall-time cap:
#
#   1. first_step.py: 4 processes (one per GPU) start the FA4 + QuACK step,
#      four ways: alone (every process compiles), distributed (warm-up on an
#      empty file:// remote, JAX's compile cache beside it filling too),
#      warm-jax (warm remote and warm JAX cache, empty local dirs), warm
#      (warm remote, JAX's cache off). Per rank: imports, kernels got,
#      setup, trace + lower, XLA compile, first run.
#   2. cluster.py on a file:// remote (the host has no redis-server): N = 32,
#      16, 4, 1 processes (largest first: a cut-off run keeps those), 8
#      kernels, cold and warm: the warm remote get's median on a host with
#      cores to spare. It gets what is left of the cap (at least ~45 s).
#
# Run after `bash tools/gpu/gpu setup` (its site: CUTECALL_SITE, /tmp/site):
#   bash bench/warm_start/device_run.sh            # cap CAP=210 s (3.5 min)
#   PYTHON=.venv/bin/python bash bench/warm_start/device_run.sh --dry-run   # CPU here
# Writes $OUT/warm_start/: first_step.{json,md,log}, cluster.{json,md,log},
# gpus.txt, summary.txt.
set -u
CAP="${CAP:-210}"
if [ "${1:-}" != --inner ]; then    # the hard cap around everything below
  exec timeout -k 5 "$CAP" bash "$0" --inner "$@"
fi
shift
DRY=0; [ "${1:-}" = --dry-run ] && DRY=1
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${OUT:-/tmp/cutecall_out}"; DIR="$OUT/warm_start"; mkdir -p "$DIR"
PY="${PYTHON:-python3}"
cd "$REPO" || exit 2
if [ $DRY = 0 ]; then
  SITE="${CUTECALL_SITE:-/tmp/site}"
  [ -f "$SITE/env.sh" ] || { echo "no $SITE/env.sh: run 'bash tools/gpu/gpu setup' first"; exit 2; }
  . "$SITE/env.sh"
  export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1,2,3}"
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader >"$DIR/gpus.txt" 2>&1
  GPUS=4 FIRST=(--timeout 75) CLUSTER=(--n 32 16 4 1 --kernels 8 --compile-s 0.5)
else   # CPU: the orchestration with a stand-in step, 2 processes
  GPUS=2 FIRST=(--smoke --timeout 120)
  CLUSTER=(--n 1 4 --kernels 2 --compile-s 0.2)
fi
export PYTHONUNBUFFERED=1
left() { echo $((CAP - 5 - SECONDS)); }

echo "== [${SECONDS}s] first_step.py: alone, distributed, warm-jax, warm ($GPUS processes)"
T_FIRST=$(( $(left) - 45 )); [ "$T_FIRST" -ge 10 ] || T_FIRST=10   # 45 s kept for cluster.py
timeout -k 3 "$T_FIRST" "$PY" bench/warm_start/first_step.py --gpus "$GPUS" \
  --starts alone,distributed,warm-jax,warm --budget $((T_FIRST - 8)) "${FIRST[@]}" \
  --out "$DIR/first_step.json" --md "$DIR/first_step.md" >"$DIR/first_step.log" 2>&1
echo "first_step.py exit $? after ${SECONDS}s"
grep '^{' "$DIR/first_step.log" | cut -c1-400

if [ "$(left)" -gt 20 ]; then
  REMOTE="$(mktemp -d /tmp/cutecall-cluster-remote-XXXX)"
  echo "== [${SECONDS}s] cluster.py on file://$REMOTE ($(nproc) cores), $(left) s left"
  timeout -k 3 "$(left)" "$PY" bench/warm_start/cluster.py --remote "file://$REMOTE" \
    "${CLUSTER[@]}" --out "$DIR/cluster.json" >"$DIR/cluster.log" 2>&1
  echo "cluster.py exit $? after ${SECONDS}s"
  rm -rf "$REMOTE"
else
  echo "cluster.py skipped: $(left) s left"
fi

"$PY" - "$DIR" <<'EOF' | tee "$DIR/summary.txt"
import json, os, sys
d = sys.argv[1]
try:
    fs = json.load(open(os.path.join(d, "first_step.json")))
    for r in fs["rows"]:
        keys = ("first_step_s", "imported_s", "kernels_s", "setup_s", "lower_s", "compile_s",
                "run_s", "compiles", "remote_hits", "jax_cache_hits")
        print(r["start"], r.get("error") or " ".join(f"{k}={r[k]}" for k in keys))
    print("alone over:", {k: round(v, 2) for k, v in fs.get("alone_over", {}).items()})
except (OSError, ValueError, KeyError) as e:
    print("first_step: no results", e)
try:
    sys.path.insert(0, "bench/warm_start")
    import cluster
    c = json.load(open(os.path.join(d, "cluster.json")))
    with open(os.path.join(d, "cluster.md"), "w") as f:
        f.write(cluster.markdown(c["rows"], c["meta"]))
    for r in c["rows"]:
        print(f"cluster {r['start']} N={r['n']} K={r['kernels']} compiles={r['compiles']} "
              f"ready={r['ready_s']} s remote get median={r['remote_get_ms_median']} ms "
              f"p90={r['remote_get_ms_p90']} ms cpu={r['remote_get_cpu_ms_median']} ms")
except (OSError, ValueError, KeyError) as e:
    print("cluster: no results", e)
EOF
echo "device_run.sh done after ${SECONDS}s (cap ${CAP}s)"
