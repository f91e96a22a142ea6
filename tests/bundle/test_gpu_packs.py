"""A kernel pack on the GPU: a process using a pack of cutecall.attention's
kernels compiles nothing, and its outputs are bitwise equal to the compiled
path's (the same kernels, from the pack's bytes)."""

import textwrap

import pytest

from shared import run_python

pytestmark = pytest.mark.gpu
pytest.importorskip("flash_attn.cute")

SOURCE = textwrap.dedent('''
    import jax, jax.numpy as jnp, numpy as np
    from cutecall.attention import attention

    def inputs():
        k = jax.random.split(jax.random.PRNGKey(0), 3)
        q = jax.random.normal(k[0], (2, 512, 8, 128), jnp.bfloat16)
        kv = [jax.random.normal(x, (2, 512, 2, 128), jnp.bfloat16) for x in k[1:]]
        return q, *kv

    def step(q, k, v):
        o = attention(q, k, v, causal=True)
        g = jax.grad(lambda q, k, v: attention(q, k, v, causal=True).astype(
            jnp.float32).sum(), argnums=(0, 1, 2))(q, k, v)
        return (o,) + g

    def configs(arch):
        yield lambda: jax.jit(step).trace(*inputs()).lower(lowering_platforms=("cuda",))
''')

RUN = textwrap.dedent('''
    import sys, numpy as np, jax, cutecall, pack_source
    out = jax.jit(pack_source.step)(*pack_source.inputs())
    np.save(sys.argv[1], np.stack([np.asarray(x.astype("float32")).ravel()[:4096]
                                   for x in out]))
    print(cutecall.compile_stats()["compiles"])
''')


def test_a_pack_serves_bitwise_equal_outputs_with_no_compile(tmp_path, monkeypatch):
    import numpy as np
    (tmp_path / "pack_source.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))  # children's PYTHONPATH is sys.path
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "build-store"))
    compiled = tmp_path / "compiled.npy"
    assert int(run_python(RUN, str(compiled)).split()[-1]) > 0  # the compiled path
    from cutecall.bundle import _pack_cli
    arch = cutecall_arch()
    assert _pack_cli.main(["build", "pack_source:configs", "--arch", arch, "--out",
                           str(tmp_path / "attention.pack")]) == 0
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "empty-store"))
    monkeypatch.setenv("CUTECALL_PACKS", str(tmp_path / "attention.pack"))
    served = tmp_path / "served.npy"
    assert run_python(RUN, str(served)).split()[-1] == "0"
    assert np.array_equal(np.load(compiled), np.load(served))


def cutecall_arch() -> str:
    import cutecall
    return cutecall.current_target().arch
