"""Checks the corpus tests share (tests/external/test_*): outputs as float32
NumPy arrays, closeness and bitwise equality naming the case, and a call's
array leaves apart from its containers."""

import numpy as np


def as_numpy(x) -> np.ndarray:
    """A torch tensor or a JAX array as float32 NumPy."""
    if type(x).__module__.startswith("torch"):
        return x.detach().float().cpu().numpy()
    import jax.numpy as jnp
    return np.asarray(jnp.asarray(x).astype(jnp.float32))


def assert_close(got, want, case, what: str) -> None:
    """`got` within the case's tolerances of `want`, every value finite."""
    g, w = as_numpy(got), as_numpy(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    assert np.isfinite(g).all(), f"{case.name}: {what} has non-finite values"
    np.testing.assert_allclose(g, w, atol=case.atol, rtol=case.rtol,
                               err_msg=f"{case.name}: {what}")


def assert_same(got, want, case, what: str) -> None:
    """`got` equal to `want` bit for bit (as float32)."""
    g, w = as_numpy(got), as_numpy(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    np.testing.assert_array_equal(g, w, err_msg=f"{case.name}: {what}")


def split_arrays(args, kind=None):
    """(the array leaves of a call's arguments, a function putting arrays
    back in their places). `kind`: the leaf type that counts as an array
    (default ``jax.Array``; ``jax.ShapeDtypeStruct`` for lowering). None,
    ints and DSL scalars stay as they are."""
    import jax
    kind = kind or jax.Array
    leaves, tree = jax.tree.flatten(args)
    where = [i for i, x in enumerate(leaves) if isinstance(x, kind)]

    def rebuild(arrays):
        full = list(leaves)
        for i, a in zip(where, arrays):
            full[i] = a
        return jax.tree.unflatten(tree, full)
    return [leaves[i] for i in where], rebuild



def heavy_imports_after_building(modules, heavy) -> list:
    """The `heavy` modules a fresh process has imported after building every
    case of the corpus `modules` (names under tests/external/corpus) at
    both sizes: building a case must import none of them."""
    import json
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import importlib, json, sys\n"
            f"sys.path.insert(0, {here!r})\n"
            f"for name in {list(modules)!r}:\n"
            "    m = importlib.import_module('corpus.' + name)\n"
            "    m.cases('test'); m.cases('bench')\n"
            f"print(json.dumps([m for m in {list(heavy)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True, env=os.environ.copy())
    return json.loads(out.stdout.strip().splitlines()[-1])
