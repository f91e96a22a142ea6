"""cutlass_call with an optional tensor passed as None, QuACK's GEMM way:
``gemm(mA, mB, mD, mC, ...)`` is called from JAX as ``call(a, b, None,
...)`` -- D returned, C None. The rule puts the output at the last tensor
parameter (``mC``) and the None at ``mD``; the kernel then writes nothing
(it skips its store without ``mD``), and its output would stay unwritten.
The trace of that binding writes no tensor at all, so the placement stage
traces the next placement (``outputs.probes``): the output binds to
``mD``, the None to ``mC``. Given a C, the kernel writes ``mD`` wherever
the rule put the output, and the output moves there.

The kernel here is ours: ``d = a (+ c)``, 1-D float32, written only when
``mD`` is given. CPU: lowered for the cuda platform (real sm_90a
compiles); the GPU test checks the numbers."""

import re
from typing import Optional

import cuda.bindings.driver as cuda
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutlass
import cutlass.cute as cute

import cutecall
from cutecall._driver.outputs import probes, stage, writes as written_params

N = 1000
_THREADS = 128


@cute.kernel
def _d_kernel(a: cute.Tensor, d: cute.Tensor, c: Optional[cute.Tensor],
              has_c: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < d.shape[0]:
        if cutlass.const_expr(has_c):
            d[i] = a[i] + c[i]
        else:
            d[i] = a[i]


@cute.jit
def gemm_like(mA: cute.Tensor, mD: Optional[cute.Tensor], mC: Optional[cute.Tensor],
              stream: cuda.CUstream):
    """``mD = mA (+ mC)``; nothing is written without ``mD`` (as QuACK's
    epilogue skips its store when D is None)."""
    if cutlass.const_expr(mD is not None):
        n = mD.shape[0]
        _d_kernel(mA, mD, mC, mC is not None).launch(
            grid=((n + _THREADS - 1) // _THREADS, 1, 1), block=(_THREADS, 1, 1),
            stream=stream)


def s(n=N):
    return jax.ShapeDtypeStruct((n,), jnp.float32)


def like_a(a, *rest):
    return jax.ShapeDtypeStruct(a.shape, a.dtype)


def call():
    return cutecall.cutlass_call(gemm_like, output_shape_dtype=like_a)


def operands(lowered) -> str:
    m = re.search(r'operands = "([^"]*)"', lowered.as_text())
    assert m, lowered.as_text()[:2000]
    return m.group(1)


def test_c_none_binds_the_output_to_d_not_c(compiles):
    c = call()
    assert operands(c.lower(s(), None)) == "mA,mD"
    # The rule's binding (output at mC) was traced, and wrote nothing: one
    # compile ran, for mD.
    assert compiles() == 1
    assert stage.known_writes(c.launcher).written == {"mD"}
    # Another call site of the same kernel binds mD from the start.
    assert operands(call().lower(s(2048), None)) == "mA,mD"
    assert compiles() == 1


def test_c_given_moves_the_output_to_d(compiles):
    assert operands(call().lower(s(), s())) == "mA,mC,mD"
    assert compiles() == 1


def test_output_params_still_name_d(compiles):
    named = cutecall.cutlass_call(gemm_like, output_shape_dtype=like_a, output_params=("mD",))
    assert operands(named.lower(s(), None)) == "mA,mD"
    assert compiles() == 1


def test_nothing_written_anywhere_keeps_the_rule_after_the_probes(monkeypatch,
                                                                  fresh_key_space):
    # A kernel whose trace shows no write wherever its output sits: after
    # MAX_EMPTY_PROBES placements the rule's compiles as it is (no loop,
    # no error), as before this check.
    def blind(spec, writes):
        return written_params.ParamWrites(frozenset(), frozenset(), False)
    monkeypatch.setattr(written_params, "param_writes", blind)
    c = call()
    assert operands(c.lower(s(), None)) == "mA,mC"
    assert len(stage.last_answer(c.launcher).probes.empty) == probes.MAX_EMPTY_PROBES


def test_placements_that_run_out_compile_the_rule(compiles, monkeypatch):
    # More probes allowed than there are placements: when the rule's
    # placement comes round again, probing stops and it compiles as placed
    # (it used to cycle until "no binding compiled").
    monkeypatch.setattr(written_params, "param_writes", lambda spec, writes:
                        written_params.ParamWrites(frozenset(), frozenset(), False))
    monkeypatch.setattr(probes, "MAX_EMPTY_PROBES", 10)
    c = call()
    assert operands(c.lower(s(), None)) == "mA,mC"
    tried = stage.last_answer(c.launcher).probes
    assert tried.empty_done and len(tried.empty) == 3


def test_a_kernel_given_every_array_is_not_probed(compiles, monkeypatch):
    # No argument None or left to its default: no other placement could
    # make a trace that writes nothing write, so none is tried.
    monkeypatch.setattr(written_params, "param_writes", lambda spec, writes:
                        written_params.ParamWrites(frozenset(), frozenset(), False))
    c = call()
    c.lower(s(), s())
    assert compiles() == 1 and not stage.last_answer(c.launcher).probes.empty


@pytest.mark.gpu
def test_gpu_c_none_and_c_given():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N).astype(np.float32)
    c = rng.standard_normal(N).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(call()(jnp.asarray(a), None)), a)
    np.testing.assert_array_equal(np.asarray(call()(jnp.asarray(a), jnp.asarray(c))), a + c)
