"""The artifact store on a GPU: a second process runs the same kernels with
zero CuTe DSL compiles and the same, correct results. Each program runs in a
fresh subprocess sharing one cache directory (the test's tmp dir)."""

import json
import subprocess
import sys

import pytest

from shared import ROOT, child_env

PROGRAM = r"""
import json, jax, jax.numpy as jnp, numpy as np, cutecall
from cutecall.examples import kernels
rng = np.random.default_rng(1)
a, b = (rng.standard_normal(100_003).astype(np.float32) for _ in range(2))
x, y = (rng.standard_normal(s).astype(np.float16) for s in ((256, 128), (128, 384)))
add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=jax.ShapeDtypeStruct(a.shape, a.dtype))
gemm = cutecall.cutlass_call(kernels.gemm, output_shape_dtype=jax.ShapeDtypeStruct((256, 384), jnp.float32))
c, d = jax.jit(lambda a, b, x, y: (add(a, b), gemm(x, y)))(a, b, x, y)
ok = bool(np.allclose(np.asarray(c), a + b, rtol=1e-6)
          and np.allclose(np.asarray(d), x.astype(np.float32) @ y.astype(np.float32),
                          rtol=1e-2, atol=1e-2))
print(json.dumps(dict(cutecall.compile_stats(), correct=ok)))
"""


def run(args, cache):
    env = child_env(CUTECALL_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout


@pytest.mark.gpu
def test_second_process_runs_with_zero_compiles(tmp_path):
    cold = json.loads(run(["-c", PROGRAM], tmp_path / "cache").splitlines()[-1])
    warm = json.loads(run(["-c", PROGRAM], tmp_path / "cache").splitlines()[-1])
    assert (cold["compiles"], cold["disk_hits"], cold["correct"]) == (2, 0, True)
    assert (warm["compiles"], warm["disk_hits"], warm["correct"]) == (0, 2, True)


@pytest.mark.gpu
def test_warm_start_benchmark(tmp_path):
    """bench/warm_start: 10 kernels (GEMM included), cold then warm."""
    out = tmp_path / "warm_start.json"
    run(["-m", "bench.warm_start.run", "--warm-runs", "1",
         "--cache-dir", str(tmp_path / "cache"), "--out", str(out)], tmp_path / "unused")
    result = json.loads(out.read_text())
    cold, warm = result["runs"]
    assert (cold["compiles"], cold["disk_hits"]) == (10, 0)
    assert (warm["compiles"], warm["disk_hits"]) == (0, 10)
    assert cold["correct"] is True and warm["correct"] is True
    assert warm["kernels_s"] < cold["kernels_s"]
