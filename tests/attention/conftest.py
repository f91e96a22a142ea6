"""cutecall.attention's tests (FlashAttention-4 in JAX): their helpers
(attention_checks.py, fa4_capture.py) live beside them and are importable
in any pytest import mode."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture
def cpu_numerics():
    """A CPU test of float32 numerics runs on the CPU device on any host: a
    GPU's float32 matmuls default to TF32 (about 1e-3 relative), which the
    tight tolerances of these tests (1e-5 to 1e-4) do not allow."""
    import jax
    with jax.default_device(jax.devices("cpu")[0]):
        yield
