"""Example CuTe DSL launchers used by cutecall's tests and benchmarks.

Every public function here is a ``@cute.jit`` *launcher* with the calling
convention of NVIDIA's ``cutlass.jax.cutlass_call``::

    launcher(stream, *input_tensors, *output_tensors, **constexpr_kwargs)

* ``stream`` is a ``cuda.CUstream``; every kernel is launched on it.
* Each tensor is a ``cute.Tensor`` viewing a row-major (C-contiguous) buffer
  in global memory: ``cute.make_tensor(ptr, cute.make_layout(shape,
  stride=stride))`` where the shape values are dynamic ``Int32``, the
  innermost stride is the static ``1`` and the outer strides are dynamic
  ``Int64``. Pointers are assumed 16-byte aligned. One compilation therefore
  serves every shape; the kernels below bounds-check (predicate) their
  accesses unless their docstring states a divisibility requirement. They
  also compile when the caller bakes shapes in statically.
* Keyword-only compile-time parameters are annotated ``cutlass.Constexpr``.

The launchers (all names are public API used by tests):

==================  ===========================================================
``empty_launcher``  launches a kernel that does nothing (launch overhead)
``vector_add``      ``c = a + b`` on 1-D tensors, any length, any float dtype
``scale_bias_act``  ``out = act(alpha * x + bias)``: constexprs + broadcasting
``transpose``       2-D transpose through a padded shared-memory tile
``row_sum``         ``out[m] = sum_n x[m, n]`` with a warp-shuffle reduction
``gemm``            fp16/bf16 -> fp32 tensor-core GEMM (``mma.sync``)
``copy``            1-D copy with 128-bit vector accesses (bandwidth test)
==================  ===========================================================

The kernels live by topic: :mod:`~cutecall.examples.elementwise` (1-D),
:mod:`~cutecall.examples.matrix` (2-D) and :mod:`~cutecall.examples.gemm`;
this module gathers them. ``REFERENCES`` maps each launcher name to a
pure-numpy reference taking the inputs (and constexpr kwargs) and
returning the expected output(s).
"""

import numpy as np

from .elementwise import copy, empty_launcher, vector_add
from .gemm import gemm
from .matrix import row_sum, scale_bias_act, transpose

__all__ = [
    "empty_launcher",
    "vector_add",
    "scale_bias_act",
    "transpose",
    "row_sum",
    "gemm",
    "copy",
    "REFERENCES",
]


def _ref_scale_bias_act(x, bias, *, alpha, relu):
    y = np.float32(alpha) * x.astype(np.float32) + bias.astype(np.float32)[None, :]
    if relu:
        y = np.maximum(y, np.float32(0.0))
    return y


def _ref_gemm(a, b):
    return a.astype(np.float32) @ b.astype(np.float32)


#: Launcher name -> numpy reference. Each takes the launcher's *input* arrays
#: (plus its constexpr kwargs) and returns the expected output array (for
#: ``empty_launcher``: None, the output is left untouched). Results are in
#: float32 where the kernel computes in float32; cast to the output dtype.
REFERENCES = {
    "empty_launcher": lambda x: None,
    "vector_add": lambda a, b: a + b,
    "scale_bias_act": _ref_scale_bias_act,
    "transpose": lambda x: np.ascontiguousarray(x.T),
    "row_sum": lambda x: x.astype(np.float32).sum(axis=1),
    "gemm": _ref_gemm,
    "copy": lambda x: x.copy(),
}
