"""An output never binds to a parameter the kernel only reads.

QuACK's symmetric GEMM's way, on a kernel of ours: ``sym_like(mA, mD, mC,
epi, stream)`` writes ``mD = mA (+ mC)`` and ``epi.out = mD``; it is called
``(a, None, epi)`` with the output aliased whole to ``epi.out``. Without the
output passed no binding fits (``epi`` cannot fill the tensor parameter
``mC``), so the output is passed too, and the rule puts it at ``mC``: the
trace of that binding reads ``mC`` and writes ``epi``, no written parameter
fits the call, so that placement is passed over (``outputs.probes``) and the
output lands at ``mD`` -- one compile, what ``output_params=("mD",)`` gives.
When the evidence misses a write (every placement reads its output only),
the rule's placement compiles after the probes, unchecked, as before.

1-D float32. CPU: lowered for the cuda platform (real sm_90a compiles)."""

import re
from typing import NamedTuple, Optional

import cuda.bindings.driver as cuda
import jax
import jax.numpy as jnp

import cutlass
import cutlass.cute as cute

import cutecall
from cutecall._driver.outputs import stage, writes as written_params

N = 1000
_THREADS = 128


class Epi(NamedTuple):
    out: cute.Tensor


@cute.kernel
def _kernel(a: cute.Tensor, d: Optional[cute.Tensor], c: Optional[cute.Tensor],
            aux: cute.Tensor, has_c: cutlass.Constexpr, has_d: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < aux.shape[0]:
        v = a[i]
        if cutlass.const_expr(has_c):
            v = v + c[i]
        if cutlass.const_expr(has_d):
            d[i] = v
        aux[i] = v


@cute.jit
def sym_like(mA: cute.Tensor, mD: Optional[cute.Tensor], mC: Optional[cute.Tensor],
             epi, stream: cuda.CUstream):
    """``mD = mA (+ mC)`` (when ``mD`` is given) and ``epi.out`` the same."""
    n = epi.out.shape[0]
    _kernel(mA, mD, mC, epi.out, mC is not None, mD is not None).launch(
        grid=((n + _THREADS - 1) // _THREADS, 1, 1), block=(_THREADS, 1, 1),
        stream=stream)


def s(n=N):
    return jax.ShapeDtypeStruct((n,), jnp.float32)


def call(**kw):
    return cutecall.cutlass_call(
        sym_like, output_shape_dtype=lambda a, d, epi: s(a.shape[0]),
        input_output_aliases={(2, "out"): 0}, **kw)


def operands(lowered) -> str:
    m = re.search(r'operands = "([^"]*)"', lowered.as_text())
    assert m, lowered.as_text()[:2000]
    return m.group(1)


def test_an_aliased_output_binds_where_written_not_where_read(compiles):
    c = call()
    assert operands(c.lower(s(), None, Epi(s()))) == "mA,epi.out,mD"
    assert compiles() == 1
    assert stage.last_answer(c.launcher).probes.read_only_seen == {(2,)}  # mC: read
    named = call(output_params=("mD",))
    assert operands(named.lower(s(), None, Epi(s()))) == "mA,epi.out,mD"
    assert compiles() == 1  # the same kernel


def test_read_only_probes_end_with_the_rule(compiles, monkeypatch):
    # Evidence that misses a write: every placement reads its output only,
    # while epi is written. After the probes the rule's placement (mC)
    # compiles, unchecked (no loop, no error), as before this check.
    monkeypatch.setattr(written_params, "param_writes", lambda spec, writes:
                        written_params.ParamWrites(frozenset({"epi"}), frozenset(), False))
    c = call()
    assert operands(c.lower(s(), None, Epi(s()))) == "mA,epi.out,mC"
    assert stage.last_answer(c.launcher).probes.read_only_done and compiles() == 1
