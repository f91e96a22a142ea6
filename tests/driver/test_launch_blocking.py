"""cutecall.set_launch_blocking (CUTECALL_LAUNCH_BLOCKING): the switch on
CPU; on a GPU, a kernel writing out of bounds raises at its own launch,
naming itself and the CUDA status (each case in a child process: CUDA's
context does not survive an illegal address)."""

import re
import subprocess
import sys

import pytest

import cutecall
from shared import child_env


def test_the_switch_and_its_environment_variable():
    assert cutecall.launch_blocking() is False
    cutecall.set_launch_blocking(True)
    try:
        assert cutecall.launch_blocking() is True
    finally:
        cutecall.set_launch_blocking(False)
    with pytest.raises(TypeError, match="on must be a bool, got 1"):
        cutecall.set_launch_blocking(1)
    out = subprocess.run([sys.executable, "-c",
                          "import cutecall; print(cutecall.launch_blocking())"],
                         env=child_env(CUTECALL_LAUNCH_BLOCKING="1"),
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True", out.stderr


TORCH = """
import torch, cutecall.torch as ct
from cutecall.examples import faults
k = ct.kernel(faults.oob_write)
out = torch.zeros(16, device="cuda")
try:
    k(out, 1 << 40)
    torch.cuda.synchronize()
    print("no error")
except Exception as e:
    print("raised:", type(e).__name__, e)
"""

JAX = """
import jax, jax.numpy as jnp, cutecall
from cutecall.examples import faults
call = cutecall.cutlass_call(faults.oob_write, output_shape_dtype=jax.ShapeDtypeStruct((16,), jnp.float32))
try:
    jax.block_until_ready(call(1 << 40))
    print("no error")
except Exception as e:
    print("raised:", type(e).__name__, e)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("program", [TORCH, JAX], ids=["torch", "jax"])
def test_an_out_of_bounds_write_raises_naming_its_kernel(program):
    out = subprocess.run([sys.executable, "-c", program],
                         env=child_env(CUTECALL_LAUNCH_BLOCKING="1"),
                         capture_output=True, text=True, timeout=300)
    assert "raised:" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "kernel 'oob_write' failed on the GPU" in out.stdout
    assert "CUDA_ERROR_ILLEGAL_ADDRESS (700)" in out.stdout
    assert re.search(r"launch: grid \(\d+, \d+, \d+\), block \(\d+, \d+, \d+\)",
                     out.stdout), out.stdout
