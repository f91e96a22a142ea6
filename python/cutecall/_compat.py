"""Version shims. Every import that differs across JAX or CuTe DSL
releases lives here and nowhere else."""

from __future__ import annotations

import contextlib
import importlib.metadata

try:  # jax >= 0.4.36
    from jax.extend.core import Primitive
except ImportError:  # pragma: no cover
    from jax.core import Primitive  # type: ignore

from jax._src.interpreters import mlir  # lowering registration


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def dsl_version() -> str | None:
    return package_version("nvidia-cutlass-dsl")


@contextlib.contextmanager
def dsl_target_arch(arch: str):
    """Makes the CuTe DSL treat `arch` as the machine's arch while compiling.

    The DSL builds the host JIT engine that ``dump_to_object`` needs only when
    the runtime arch can run the compiled one; on a machine without a GPU it
    detects a default arch and the export fails. The arch is a compile input
    of the DSL, restored afterwards. Callers hold the compile lock.
    """
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    envar = CuTeDSL._get_dsl().envar
    previous = envar._arch
    envar.arch = arch
    try:
        yield
    finally:
        envar._arch = previous
