"""Launches through the driver (CUTECALL_LAUNCH_DRIVER, on by default): a
CuTe DSL module loads routed to cutecall_launch_drv, so a launch error
names its grid and block without launch blocking, and a launch the driver
refuses is handed to the CUDA runtime, whose error the message names; with
CUTECALL_LAUNCH_DRIVER=0 the module loads as compiled. Each case in a
child process (the route is chosen when a module loads)."""

import subprocess
import sys

import pytest

from shared import child_env

pytestmark = pytest.mark.gpu

BAD_BLOCK = """
import torch, cutecall.torch as ct
from cutecall.examples import faults
k = ct.kernel(faults.bad_block)
out = torch.zeros(2048, device="cuda")
try:
    k(out)
    torch.cuda.synchronize()
    print("no error")
except Exception as e:
    print("raised:", type(e).__name__, e)
"""

ADD = """
import torch, jax, jax.numpy as jnp, cutecall, cutecall.torch as ct
from cutecall.examples import torch_kernels as tk
a, b = torch.rand(3000, device="cuda"), torch.rand(3000, device="cuda")
c = torch.empty_like(a)
ct.kernel(tk.add3)(a, b, c)
torch.cuda.synchronize()
x = jnp.arange(3000, dtype=jnp.float32)
call = cutecall.cutlass_call(tk.add3, output_shape_dtype=jax.ShapeDtypeStruct(x.shape, x.dtype))
y = jax.jit(lambda u, v: call(u, v))(x, x)
print("ok", bool(torch.equal(c, a + b)), bool((y == 2 * x).all()))
"""


def run(program, **env):
    return subprocess.run([sys.executable, "-c", program], env=child_env(**env),
                          capture_output=True, text=True, timeout=300)


def test_a_refused_launch_names_its_grid_and_block_by_default():
    out = run(BAD_BLOCK)
    assert "raised: RuntimeError" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "kernel 'bad_block' failed to launch" in out.stdout
    assert "launch: grid (1, 1, 1), block (2048, 1, 1)" in out.stdout, out.stdout


def test_with_the_driver_route_off_the_module_loads_as_compiled():
    out = run(BAD_BLOCK, CUTECALL_LAUNCH_DRIVER="0")
    assert "kernel 'bad_block' failed to launch" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "grid and block unknown (the module was loaded while " \
           "CUTECALL_LAUNCH_BLOCKING was off" in out.stdout, out.stdout


@pytest.mark.parametrize("driver", ["1", "0"])
def test_both_routes_compute_the_same_in_both_fronts(driver):
    out = run(ADD, CUTECALL_LAUNCH_DRIVER=driver)
    assert "ok True True" in out.stdout, out.stdout + out.stderr[-3000:]
