"""Launchers that fail to compile, one way each, for the tests of compile
errors (``tests/driver/test_compile_error_lines.py``):

* ``typo_launcher(stream, a, c)``: names a variable that does not exist
  (``numthreads``): a NameError in the launcher, raised while the DSL
  traces it;
* ``congruence_launcher(stream, a, c)``: its kernel indexes a rank-1
  tensor with a rank-3 coordinate: the module fails MLIR verification
  (``'cute.memref.store' op expects coordinate to be weakly congruent to
  the layout``), whose ops carry no source location.

Both take 1-D float32 ``a`` and write ``c``. The lines the errors must
name carry a ``# fails here`` comment. The DSL re-parses kernel sources:
they live in a real file.
"""

import cuda.bindings.driver as cuda

import cutlass.cute as cute


@cute.kernel
def _copy_kernel(a: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    c[tidx] = a[tidx]


@cute.jit
def typo_launcher(stream: cuda.CUstream, a: cute.Tensor, c: cute.Tensor):
    _copy_kernel(a, c).launch(grid=(1, 1, 1), block=(numthreads, 1, 1),  # noqa: F821  # fails here
                              stream=stream)


@cute.kernel
def _rank3_store_kernel(a: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    c[(tidx, 0, 1)] = a[tidx]  # fails here


@cute.jit
def congruence_launcher(stream: cuda.CUstream, a: cute.Tensor, c: cute.Tensor):
    _rank3_store_kernel(a, c).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


def failing_line(name: str) -> int:
    """The line number of the ``# fails here`` line in function `name`."""
    import inspect
    lines, start = inspect.getsourcelines(globals()[name])
    return start + next(i for i, line in enumerate(lines) if "# fails here" in line)
