"""The QuACK/FA4 corpus these tests check lives beside them, in
``tests/external/corpus`` (out of the wheel; ``bench/external`` times the
same cases): it is importable as ``corpus`` in any pytest import mode."""

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
