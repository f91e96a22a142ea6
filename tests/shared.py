"""Helpers shared by the test folders: shape shorthands and child processes.

Child processes import the *installed* cutecall (the one this process
imported), never the source checkout: their PYTHONPATH is this process's
sys.path without any directory holding another ``cutecall`` package.
"""

import json
import os
import shlex
import subprocess
import sys
import textwrap

import cutecall

INSTALLED = os.path.dirname(os.path.abspath(cutecall.__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Makes any import of the CuTe DSL compiler (`cutlass`) fail in the process.
BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "cutlass" or name.startswith("cutlass."):
                raise ImportError("blocked by the test: " + name)
    sys.meta_path.insert(0, _Block())
""")


def f32(*shape):
    import jax
    import jax.numpy as jnp
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def like_first(x, *rest):
    import jax
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def lowered_text(fn, *specs) -> str:
    import jax
    return jax.jit(fn).trace(*specs).lower(
        lowering_platforms=("cuda",)).as_text(debug_info=True)


def _other_cutecall(path: str) -> bool:
    found = os.path.join(os.path.abspath(path or "."), "cutecall")
    return os.path.isdir(found) and os.path.abspath(found) != INSTALLED


def child_env(**extra: str) -> dict:
    """The environment of a child interpreter that imports this process's
    packages: this sys.path (the DSL may live in a --target site on the GPU
    machine), less any other cutecall (a checkout's python/)."""
    path = [p for p in sys.path if p and not _other_cutecall(p)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path),
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env.update(extra)
    return env


def run_python(code: str, *args: str) -> str:
    """Runs `code` in a fresh interpreter that imports this cutecall. With
    CUTECALL_TEST_CHILD_WRAPPER set, the child runs under that command (for
    example compute-sanitizer: tools/gpu/gpu memcheck children)."""
    wrapper = shlex.split(os.environ.get("CUTECALL_TEST_CHILD_WRAPPER", ""))
    r = subprocess.run([*wrapper, sys.executable, "-c", code, *args], env=child_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def run_on_cpu_devices(code: str, n: int = 2) -> dict:
    """Runs `code` in a child process that sees `n` CPU devices; returns the
    dict it stores in `results` (JSON)."""
    env = child_env(JAX_PLATFORMS="cpu",
                    XLA_FLAGS=f"--xla_force_host_platform_device_count={n}")
    script = "import json\nresults = {}\n" + textwrap.dedent(code) + \
        "\nprint('RESULTS=' + json.dumps(results))\n"
    proc = subprocess.run([sys.executable, "-c", script], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS=")][-1]
    return json.loads(line[len("RESULTS="):])
