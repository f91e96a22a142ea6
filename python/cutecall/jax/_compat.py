"""JAX shims. Every JAX import that differs across its releases lives here
and nowhere else (the CuTe DSL's live in ``cutecall._driver.dsl``)."""

try:  # jax >= 0.4.36
    from jax.extend.core import Primitive
except ImportError:  # pragma: no cover
    from jax.core import Primitive  # type: ignore

from jax._src.interpreters import mlir  # lowering registration

__all__ = ["Primitive", "mlir"]
