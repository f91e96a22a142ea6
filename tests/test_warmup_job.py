"""Warm-up over a job (``cutecall.warmup(tasks, distributed=True)``), on CPU:
4 ``jax.distributed`` processes (a localhost coordinator) share one remote
tier on a real redis-server, each with its own empty local tier. Each of 16
real CuTe DSL kernels is compiled once in the whole job, and each process
then lowers all 16 with 0 compiles."""

import json
import os
import subprocess
import sys

import pytest

from remote_store import free_port, redis_server  # noqa: F401
from shared import child_env

RANK = r"""
import json, sys
import jax
rank, port = int(sys.argv[1]), int(sys.argv[2])
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=4,
                           process_id=rank, initialization_timeout=300)
import cutecall
from cutecall.services import workers
from remote_store import scale_bias_tasks
assert workers.fork_blocker().startswith("jax.distributed is initialized")  # never fork
report = cutecall.warmup(scale_bias_tasks(), distributed=True, workers=1)
print(report, file=sys.stderr)
cutecall.clear_cache()
before = cutecall.compile_stats()
for task in scale_bias_tasks():
    task()                                  # lower all 16 here
after = cutecall.compile_stats()
print(json.dumps({
    "compiled": [k for r in report.local.results for k, _, _, how in r.kernels
                 if how == "compiled"],
    "job_compiles": report.compiles, "loaded": report.loaded, "missing": report.missing,
    "failed": [r.error for r in report.failed],
    "lower_compiles": after["compiles"] - before["compiles"],
    "lower_loads": after["disk_hits"] - before["disk_hits"]}))
"""


def test_four_processes_compile_each_kernel_once_in_the_job(tmp_path, redis_server):
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-c", RANK, str(rank), str(port)],
        env=child_env(CUTECALL_CACHE_DIR=str(tmp_path / f"host{rank}"),
                      CUTECALL_CACHE_REMOTE=redis_server.url, JAX_PLATFORMS="cpu",
                      CUTECALL_ARCH="sm_90a"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-3000:] for _, err in outs]
    ranks = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    compiled = [k for r in ranks for k in r["compiled"]]
    assert len(compiled) == len(set(compiled)) == 16       # each once in the job
    for r, (_, err) in zip(ranks, outs):
        assert r["failed"] == [] and r["missing"] == [] and r["job_compiles"] == 16, err
        assert r["lower_compiles"] == 0 and r["lower_loads"] == 16, err
        assert r["loaded"] == 16 - len(r["compiled"]), err
    assert "compiled 4 (scale_bias_act)" in outs[0][1] or "process 0: compiled" in outs[0][1]


def test_distributed_needs_a_job():
    import cutecall
    with pytest.raises(ValueError, match="distributed=True needs a job: call "
                                         r"jax.distributed.initialize\(\)"):
        cutecall.warmup([print], distributed=True)


def test_the_cli_fills_a_remote_tier_from_a_task_list(tmp_path):
    remote = f"file://{tmp_path}/shared"
    out = subprocess.run(
        [sys.executable, "-m", "cutecall", "warmup", "test_warmup:TASKS", "--workers", "2",
         "--remote", remote], env=child_env(CUTECALL_CACHE_DIR=str(tmp_path / "ci")),
        capture_output=True, text=True, timeout=600, cwd=os.path.dirname(__file__))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("1 compiled, 0 from the store") == 2
    assert f"remote tier {remote}: 2 entries" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "cutecall", "warmup", "x:y", "--remote",
                          "nonsense"], env=child_env(), capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "CUTECALL_CACHE_REMOTE='nonsense' is not a URL" in bad.stderr


TORCH_RANK = r"""
import functools, json, os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[2]}",
                        rank=int(sys.argv[1]), world_size=2)
import cutecall
report = cutecall.warmup([functools.partial(time.sleep, 0)] * 5, distributed=True)
print(json.dumps({"rank": report.rank, "size": report.size, "kind": report.kind,
                  "here": len(report.local.results), "text": str(report)}))
dist.destroy_process_group()
"""


def test_torch_distributed_splits_the_tasks_by_rank(tmp_path):
    pytest.importorskip("torch.distributed")
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-c", TORCH_RANK, str(rank), str(port)],
        env=child_env(CUTECALL_CACHE_DIR=str(tmp_path / f"h{rank}"),
                      CUTECALL_CACHE_REMOTE=f"file://{tmp_path}/shared"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    got = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert [(g["rank"], g["size"], g["kind"], g["here"]) for g in got] == \
        [(0, 2, "torch", 3), (1, 2, "torch", 2)]
    assert "(torch.distributed, process 1 of 2): 2 of 5 tasks here" in got[1]["text"]
