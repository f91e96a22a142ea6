"""The compile log (cutecall._driver.log): compiles, store hits, misses and
evictions, and static fallbacks are recorded on logging.getLogger("cutecall")
at INFO; CUTECALL_LOG=info prints them; a bad level warns."""

import logging
import subprocess
import sys

import pytest

import cutecall
from cutecall._driver.store.local import ArtifactStore
from cutecall.examples import kernels
from cutecall.examples import specialization as sp
from shared import child_env, f32


@pytest.fixture
def records(caplog, tmp_path, monkeypatch):
    """INFO records of the cutecall logger, with a fresh store and an empty
    in-process cache (so lookups reach the store)."""
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))
    cutecall.clear_cache()
    caplog.set_level(logging.INFO, logger="cutecall")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "cutecall"]


def lower_add(n: int, name: str):
    call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a,
                                 name=name)
    call.lower(f32(n), f32(n))


def test_a_compile_logs_kernel_arch_seconds_and_specialization(records):
    lower_add(1000, "log_add")
    (miss,) = [m for m in records() if m.startswith("store miss")]
    (line,) = [m for m in records() if m.startswith("compiled kernel 'log_add'")]
    assert "log_add" in miss
    assert " for sm_" in line and " s: " in line
    # 1000 = 8 * 125, capped at 16 bytes of float32: class 4
    assert "a:Float32[?%4]" in line and "c:Float32[?%4]" in line


def test_a_second_lookup_is_a_store_hit(records):
    lower_add(2048, "log_add_hit")
    cutecall.clear_cache()          # the in-process cache only: the store stays
    lower_add(2048, "log_add_hit")
    assert [m for m in records() if m.startswith("store hit: kernel 'log_add_hit'")]
    assert len([m for m in records() if m.startswith("compiled kernel 'log_add_hit'")]) == 1


def test_evictions_are_logged(records, tmp_path):
    store = ArtifactStore(str(tmp_path / "small"), max_bytes=3000)
    for i in range(4):
        store.get_or_build(f"{i:08x}" * 2, {"v": 1}, lambda: ({}, b"x" * 1000))
    store.evict()
    assert [m for m in records() if m.startswith("store eviction: entry")]


def test_a_static_fallback_is_logged(records):
    call = cutecall.cutlass_call(sp.row_sum_unrolled,
                                 output_shape_dtype=lambda x: f32(x.shape[0]),
                                 name="log_row_sum_unrolled")
    with pytest.warns(cutecall.StaticFallbackWarning):
        call.lower(f32(1001, 16))   # a row count class no other test compiles
    (line,) = [m for m in records()
               if m.startswith("kernel 'log_row_sum_unrolled': static fallback")]
    assert "static extents 16" in line


PROGRAM = """
import jax, jax.numpy as jnp, cutecall
from cutecall.examples import kernels
s = jax.ShapeDtypeStruct((4096,), jnp.float32)
cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a,
                      name="env_logged").lower(s, s)
"""


def test_cutecall_log_env_prints_to_stderr(tmp_path):
    env = child_env(CUTECALL_LOG="info", CUTECALL_CACHE_DIR=str(tmp_path / "c"))
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "cutecall INFO: store miss: kernel 'env_logged'" in out.stderr
    assert "cutecall INFO: compiled kernel 'env_logged' for sm_" in out.stderr


def test_a_bad_level_warns_and_is_ignored(tmp_path):
    env = child_env(CUTECALL_LOG="loud", CUTECALL_CACHE_DIR=str(tmp_path / "c"))
    out = subprocess.run([sys.executable, "-W", "always", "-c", PROGRAM], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "CUTECALL_LOG='loud' is not a log level" in out.stderr
    assert "cutecall INFO" not in out.stderr
