"""Launchers whose outputs come first, written the ways that hide a write
from a placement question, for the tests of the output placement stage
(``cutecall._driver.outputs``):

* ``rows_first(stream, out, x, w)``: ``out[i, j] = x[i, j] * w[j]``; it
  asserts that ``x``'s rows are 64 elements apart before anything is
  written (a static stride its authors rely on);
* ``ptx_first(stream, out, x, y)``: ``out = x + y``, stored only by inline
  PTX (``st.global``) at ``out``'s address plus the offset;
* ``ptx_hidden(stream, out, x, y)``: the same, the address passed through
  an empty inline asm first: no trace can tell which tensor it is.

``x``/``out`` 2-D float32 for ``rows_first`` (64 columns), 1-D float32
otherwise; 128 threads a block. The DSL re-parses kernel sources: they live
in a real file.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

_THREADS = 128


def _index():
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    return bidx * _THREADS + tidx


def _grid(n):
    return ((n + _THREADS - 1) // _THREADS, 1, 1)


@cute.kernel
def _rows_kernel(out: cute.Tensor, x: cute.Tensor, w: cute.Tensor):
    i = _index()
    if i < out.shape[0]:
        for j in cutlass.range(out.shape[1]):
            out[i, j] = x[i, j] * w[j]


@cute.jit
def rows_first(stream: cuda.CUstream, out: cute.Tensor, x: cute.Tensor, w: cute.Tensor):
    """``out = x * w`` row by row; x's rows must be 64 apart."""
    assert x.stride[0] == 64, "x's rows must be 64 elements apart"
    _rows_kernel(out, x, w).launch(grid=_grid(out.shape[0]), block=(_THREADS, 1, 1),
                                   stream=stream)


@dsl_user_op
def _st_global(address: cutlass.Int64, value: cutlass.Float32, *, loc=None, ip=None):
    llvm.inline_asm(None, [cutlass.Int64(address).ir_value(loc=loc, ip=ip),
                           cutlass.Float32(value).ir_value(loc=loc, ip=ip)],
                    "st.global.f32 [$0], $1;", "l,f", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
                    loc=loc, ip=ip)


@dsl_user_op
def _opaque(value: cutlass.Int64, *, loc=None, ip=None) -> cutlass.Int64:
    return cutlass.Int64(llvm.inline_asm(
        T.i64(), [cutlass.Int64(value).ir_value(loc=loc, ip=ip)], "mov.b64 $0, $1;",
        "=l,l", has_side_effects=False, is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@cute.kernel
def _ptx_kernel(out: cute.Tensor, x: cute.Tensor, y: cute.Tensor, hide: cutlass.Constexpr):
    i = _index()
    if i < x.shape[0]:
        base = out.iterator.toint()
        if cutlass.const_expr(hide):
            base = _opaque(base)
        _st_global(base + cutlass.Int64(i) * 4, x[i] + y[i])


@cute.jit
def ptx_first(stream: cuda.CUstream, out: cute.Tensor, x: cute.Tensor, y: cute.Tensor):
    """``out = x + y``, written by inline PTX at out's address."""
    _ptx_kernel(out, x, y, False).launch(grid=_grid(x.shape[0]), block=(_THREADS, 1, 1),
                                         stream=stream)


@cute.jit
def ptx_hidden(stream: cuda.CUstream, out: cute.Tensor, x: cute.Tensor, y: cute.Tensor):
    """``out = x + y``, by inline PTX at an address no trace ties to out."""
    _ptx_kernel(out, x, y, True).launch(grid=_grid(x.shape[0]), block=(_THREADS, 1, 1),
                                        stream=stream)
