"""`make demo` (python -m cutecall.demo) on a machine without a GPU: it
compiles, shows the lowered call, says it cannot launch; a second run says
the kernel came from the artifact store, not that it compiled."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")


def _demo(cache) -> str:
    out = subprocess.run([sys.executable, "-m", "cutecall.demo"], capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "CUTECALL_CACHE_DIR": str(cache)})
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return out.stdout


def test_demo_compiles_then_loads_from_the_store(tmp_path):
    first = _demo(tmp_path / "cache")
    assert "compiled 'vector_add' for sm_" in first and "(compiles: 1, store hits: 0)" in first
    assert "custom_call" in first
    second = _demo(tmp_path / "cache")
    assert "loaded 'vector_add' from the artifact store" in second
    assert "(compiles: 0, store hits: 1)" in second
    if "cannot be launched here" not in first:  # a GPU machine launches
        assert "max |error|" in first
