"""GPU: bundles run from JAX in a process where the CuTe DSL compiler
(`cutlass`) cannot be imported, and jax.export artifacts of functions using
cutecall kernels round-trip through a fresh process (concrete and symbolic
shapes). Marked `gpu`: skipped cleanly where JAX sees no CUDA device."""

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from shared import BLOCKER, f32, like_first, run_python

pytestmark = pytest.mark.gpu

# Runs in the child, after BLOCKER: checks results, then that no `cutlass`
# module was imported.
CHILD_TAIL = textwrap.dedent("""
    loaded = [m for m in sys.modules if m == "cutlass" or m.startswith("cutlass.")]
    assert not loaded, loaded
    print("CHILD OK")
""")


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    from cutecall.examples import kernels, signatures
    f16 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float16)
    n, m, k = jax.export.symbolic_shape("n, m, k")
    calls = {
        # Symbolic example dims promise no divisibility: these entries serve
        # every extent (concrete ones serve their divisibility class).
        "vector_add": cutecall.compile(kernels.vector_add, f32(n), f32(n),
                                       output_shape_dtype=like_first),
        "affine": cutecall.compile(signatures.affine, f32(64), 1.0, 2, 3, True,
                                   output_shape_dtype=like_first),
        "transpose": cutecall.compile(
            kernels.transpose, f32(m, k),
            output_shape_dtype=lambda x: jax.ShapeDtypeStruct(x.shape[::-1],
                                                              x.dtype)),
        "gemm": cutecall.compile(
            kernels.gemm, f16(256, 128), f16(128, 384),
            output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(
                (a.shape[0], b.shape[1]), jnp.float32)),
    }
    path = tmp_path_factory.mktemp("gpu_bundle") / "kernels.bundle"
    cutecall.export(path, calls)
    return path


def test_bundle_runs_from_jax_with_cutlass_blocked(bundle_dir):
    out = run_python(BLOCKER + textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        import cutecall
        b = cutecall.load_bundle(sys.argv[1])
        rng = np.random.default_rng(0)
        for n in (1, 17, 100_003):
            x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
            np.testing.assert_array_equal(b["vector_add"](x, y), x + y)
            jitted = jax.jit(lambda p, q: b["vector_add"](p, q) * 2)
            np.testing.assert_allclose(jitted(x, y), 2 * (x + y), rtol=1e-6)
        x = rng.standard_normal(1000).astype(np.float32)
        got = b["affine"](x, 1.5, 2, offset=-7, negate=True)
        np.testing.assert_allclose(got, -(np.float32(1.5) * x + 2 - 7), rtol=1e-6)
        m = rng.standard_normal((301, 129)).astype(np.float32)
        np.testing.assert_array_equal(b["transpose"](m), m.T)
        a = rng.standard_normal((256, 128)).astype(np.float16)
        c = rng.standard_normal((128, 384)).astype(np.float16)
        want = a.astype(np.float32) @ c.astype(np.float32)
        np.testing.assert_allclose(b["gemm"](a, c), want, rtol=2e-2, atol=2e-2)
    """) + CHILD_TAIL, str(bundle_dir))
    assert "CHILD OK" in out


def _export(fn, *structs) -> bytes:
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs it")
    exp = jax.export.export(jax.jit(fn), platforms=["cuda"],
                            disabled_checks=cutecall.jax_export_checks())(*structs)
    return exp.serialize()


RUN_EXPORTED = BLOCKER + textwrap.dedent("""
    import sys
    import jax, numpy as np
    import cutecall
    cutecall.register()  # the FFI targets, before the artifact is compiled
    exp = jax.export.deserialize(open(sys.argv[1], "rb").read())
    rng = np.random.default_rng(1)
    for n in map(int, sys.argv[2].split(",")):
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        got = exp.call(x, y)
        np.testing.assert_allclose(got, 2 * (x + y) + 1, rtol=1e-6)
        print("ran n =", n)
""") + CHILD_TAIL


@pytest.mark.parametrize("symbolic", [False, True], ids=["concrete", "symbolic"])
def test_jax_export_round_trip_in_a_fresh_process(symbolic, tmp_path):
    from cutecall.examples import kernels
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first)
    n = jax.export.symbolic_shape("n")[0] if symbolic else 1000
    blob = tmp_path / "f.jax_export"
    blob.write_bytes(_export(lambda a, b: add(a, b) * 2 + 1, f32(n), f32(n)))
    sizes = "17,1000,4099" if symbolic else "1000"
    out = run_python(RUN_EXPORTED, str(blob), sizes)
    assert "CHILD OK" in out and out.count("ran n =") == len(sizes.split(","))


def test_bundle_entry_export_round_trip(bundle_dir, tmp_path):
    b = cutecall.load_bundle(bundle_dir)
    n, = jax.export.symbolic_shape("n")
    blob = tmp_path / "bundle_fn.jax_export"
    blob.write_bytes(_export(lambda x, y: b["vector_add"](x, y) * 2 + 1,
                             f32(n), f32(n)))
    out = run_python(RUN_EXPORTED, str(blob), "5,70000")
    assert "CHILD OK" in out


def test_bundle_in_process_matches_cutlass_call(bundle_dir):
    from cutecall.examples import kernels
    b = cutecall.load_bundle(bundle_dir)
    x = jax.random.normal(jax.random.key(0), (5000,), jnp.float32)
    y = jax.random.normal(jax.random.key(1), (5000,), jnp.float32)
    direct = cutecall.cutlass_call(kernels.vector_add,
                                   output_shape_dtype=like_first)(x, y)
    np.testing.assert_array_equal(b["vector_add"](x, y), direct)
    np.testing.assert_array_equal(jax.jit(b["vector_add"])(x, y), direct)


def test_a_bundle_is_checked_against_this_gpus_own_properties(bundle_dir, tmp_path):
    """The driver's answers (``_core.device_props``, C++'s
    ReadDeviceAttributes) meet a bundle's ``device-reads``: an entry whose
    kernel read this GPU's SM count loads; one that read another count is
    refused, naming both."""
    import dataclasses
    from cutecall import _core
    props = _core.device_props(0)
    assert props["sm_count"] > 0 and props["smem_per_block_optin"] > 0
    kernel = cutecall.load_bundle(bundle_dir).compiled("vector_add")
    here = dataclasses.replace(kernel, device_reads=(
        ("sm_count", props["sm_count"]), ("smem_per_block_optin", props["smem_per_block_optin"])))
    elsewhere = dataclasses.replace(kernel, device_reads=(("sm_count", props["sm_count"] + 16),))
    cutecall.export(tmp_path / "here", {"k": here})
    cutecall.export(tmp_path / "elsewhere", {"k": elsewhere})
    assert cutecall.load_bundle(tmp_path / "here").compiled("k").device_reads == \
        tuple(sorted(here.device_reads))
    with pytest.raises(cutecall.BundleError) as e:
        cutecall.load_bundle(tmp_path / "elsewhere")
    assert f"read sm_count = {props['sm_count'] + 16}" in str(e.value)
    assert f"this GPU's sm_count is {props['sm_count']}" in str(e.value)
