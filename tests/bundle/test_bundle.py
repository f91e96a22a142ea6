"""Bundles on CPU: manifest round trip, rejection of tampered or mismatched
bundles, loading and lowering with the CuTe DSL compiler blocked, the CLI,
and jax.export serialize/deserialize for the cuda platform. Real CuTe DSL
compiles for sm_90a (no GPU needed)."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall import _core
from cutecall.bundle import _write as _bundle
from shared import BLOCKER, f32, like_first, run_python

@pytest.fixture(scope="module")
def calls():
    from cutecall.examples import kernels, signatures
    return {
        "vector_add": cutecall.compile(kernels.vector_add, f32(1024), f32(1024),
                                       output_shape_dtype=like_first),
        "affine": cutecall.compile(signatures.affine, f32(64), 1.0, 2, 3, True,
                                   output_shape_dtype=like_first),
    }


@pytest.fixture
def bundle_dir(calls, tmp_path):
    path = tmp_path / "kernels.bundle"
    cutecall.export(path, {**calls, "bare_add": calls["vector_add"].kernel})
    return path


def reseal(path, edit):
    """Applies `edit` to the manifest body and writes it with a valid digest."""
    text = (path / "manifest.txt").read_text()
    body = edit(text[:text.rindex("manifest-sha256 ")])
    digest = hashlib.sha256(body.encode()).hexdigest()
    (path / "manifest.txt").write_text(body + f"manifest-sha256 {digest}\n")


def lowered_text(fn, *structs) -> str:
    return jax.jit(fn).trace(*structs).lower(lowering_platforms=("cuda",)).as_text()


# -- round trip ------------------------------------------------------------------

def test_manifest_round_trip(calls, bundle_dir, tmp_path):
    b = cutecall.load_bundle(bundle_dir)
    assert sorted(b) == ["affine", "bare_add", "vector_add"]
    for name, want in calls.items():
        got = b[name]
        assert got.kernel == want.kernel and got.kernel.module == want.kernel.module
        for field in ("function", "plan", "operand_names", "symbol_names",
                      "num_slots", "arch", "key"):
            assert getattr(got.kernel, field) == getattr(want.kernel, field)
        assert got.scalars == want.scalars and got.contract == want.contract
    assert b["affine"].scalars == (("scale", "Float32"), ("shift", "Int32"),
                                   ("offset", "Int64"), ("negate", "Boolean"))
    assert b["bare_add"].contract is None
    assert b.compiled("vector_add") == calls["vector_add"].kernel
    assert b.versions["cutecall"] == cutecall.__version__
    # One object file per distinct object; the same kernels, the same bytes.
    assert len(os.listdir(bundle_dir / "objects")) == 2
    again = tmp_path / "again"
    digest = cutecall.export(again, {**calls, "bare_add": calls["vector_add"].kernel})
    assert digest == b.digest
    assert (again / "manifest.txt").read_bytes() == \
        (bundle_dir / "manifest.txt").read_bytes()


def test_bundle_entry_lowers_to_the_custom_call(bundle_dir):
    b = cutecall.load_bundle(bundle_dir)
    add = b["vector_add"]
    text = lowered_text(lambda x, y: add(x, y) * 2, f32(76), f32(76))
    assert "@cutecall_call_v1(" in text and add.kernel.sha256 in text
    text = lowered_text(lambda x: b["affine"](x, 1.5, 2, negate=True, offset=7),
                        f32(32))
    bits = int(np.array(1.5, np.float32).view(np.int32))
    assert f"scalars = dense<[{bits}, 2, 7, 1]>" in text


def test_bundle_entry_call_errors(bundle_dir):
    b = cutecall.load_bundle(bundle_dir)
    with pytest.raises(TypeError, match="takes 2 input arrays"):
        b["vector_add"](np.zeros(4, np.float32))
    with pytest.raises(TypeError, match=r"input 1 .* is int32\[4\].*rank-1 float32"):
        b["vector_add"](np.zeros(4, np.float32), np.zeros(4, np.int32))
    with pytest.raises(TypeError, match="needs runtime scalar 'negate'"):
        b["affine"](np.zeros(4, np.float32), 1.0, 2, 3)
    with pytest.raises(TypeError, match="no runtime scalar 'gain'"):
        b["affine"](np.zeros(4, np.float32), 1.0, 2, 3, True, gain=2)
    with pytest.raises(ValueError, match="out of range"):
        b["affine"](np.zeros(4, np.float32), 1.0, 2**40, 3, True)
    with pytest.raises(TypeError, match="without a JAX call contract"):
        b["bare_add"](np.zeros(4, np.float32), np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="output 0 .* is float32"):
        b["vector_add"](np.zeros(4, np.float32), np.zeros(4, np.float32),
                        output_shape_dtype=jax.ShapeDtypeStruct((4,), jnp.int32))
    # The entry records the divisibility classes it was compiled for (1024
    # f32: multiples of 4); an extent outside them is refused when traced.
    with pytest.raises(ValueError, match=r"vector_add' input 'a' dim 0 = 1001 is "
                                         r"not divisible by 4"):
        jax.jit(b["vector_add"]).trace(f32(1001), f32(1001))
    jax.jit(b["vector_add"]).trace(f32(1004), f32(1004))  # in the class: fine


def test_output_shape_rules():
    from cutecall.examples import kernels
    gemm = cutecall.compile(
        kernels.gemm, jax.ShapeDtypeStruct((64, 32), jnp.float16),
        jax.ShapeDtypeStruct((32, 48), jnp.float16),
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(
            (a.shape[0], b.shape[1]), jnp.float32))
    assert gemm.contract.outputs == (("float32", ((0, 0), (1, 1))),)
    odd = cutecall.compile(kernels.vector_add, f32(8), f32(8),
                           output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(
                               (a.shape[0] * 1 + 0,), a.dtype))
    assert odd.contract.outputs[0][1] == ((0, 0),)
    fixed = cutecall.compile(kernels.vector_add, f32(8), f32(8),
                             output_shape_dtype=f32(8))
    assert fixed.contract.outputs == (("float32", (8,)),)
    text = lowered_text(lambda x: gemm(x, x.T[:, :48].astype(jnp.float16)),
                        jax.ShapeDtypeStruct((48, 48), jnp.float16))
    assert "tensor<48x48xf32>" in text


# -- rejection -------------------------------------------------------------------

def flip_object(path):
    obj = next((path / "objects").iterdir())
    data = bytearray(obj.read_bytes())
    data[len(data) // 2] ^= 0x10
    obj.write_bytes(bytes(data))
    return obj.name


CASES = {
    "tampered object": (flip_object, ["objects/", "field 'sha256'", "tampered"]),
    "truncated object": (lambda p: next((p / "objects").iterdir()).write_bytes(b"\x7fELF"),
                         ["objects/", "has 4 bytes", "field 'size'"]),
    "missing object": (lambda p: next((p / "objects").iterdir()).unlink(),
                       ["missing file 'objects/"]),
    "missing manifest": (lambda p: (p / "manifest.txt").unlink(),
                         ["missing file", "manifest.txt"]),
    "tampered manifest": (lambda p: (p / "manifest.txt").write_text(
        (p / "manifest.txt").read_text().replace("arch sm_90a", "arch sm_80", 1)),
        ["manifest.txt", "field 'manifest-sha256'", "tampered"]),
    "truncated manifest": (lambda p: (p / "manifest.txt").write_text(
        (p / "manifest.txt").read_text()[:300]), ["manifest.txt", "truncated"]),
    "format version": (lambda p: reseal(p, lambda t: t.replace(
        "cutecall-bundle 3", "cutecall-bundle 4")),
        ["field 'cutecall-bundle' must be 1..3"]),
    "device reads": (lambda p: reseal(p, lambda t: t.replace(
        "\nend\n", "\ndevice-reads sm_count=-1\nend\n", 1)),
        ["entry 'affine'", "field 'device-reads' must be <name>=<value>"]),
    "plan version": (lambda p: reseal(p, lambda t: t.replace(
        "plan-version 3\nplan 3", "plan-version 9\nplan 9", 1)),
        ["entry 'affine'", "field 'plan-version' is 9", "1..3"]),
    "num slots": (lambda p: reseal(p, lambda t: t.replace(
        "num-slots 6", "num-slots 5", 1)),
        ["entry 'bare_add'", "field 'num-slots' is 5", "plan has 6"]),
    "jax contract": (lambda p: reseal(p, lambda t: t.replace(
        'jax {"aliases"', 'jax {"nope"', 1)), ["entry 'affine'", "field 'jax'"]),
    "world writable": (lambda p: os.chmod(p, 0o777), ["writable by other users"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rejects_bad_bundles(bundle_dir, case):
    damage, fragments = CASES[case]
    damage(bundle_dir)
    with pytest.raises(cutecall.BundleError) as e:
        cutecall.load_bundle(bundle_dir)
    for f in fragments + [str(bundle_dir)]:
        assert f in str(e.value), (f, str(e.value))


def test_pinned_digest_and_arch(bundle_dir, monkeypatch):
    b = cutecall.load_bundle(bundle_dir, digest=None)
    assert cutecall.load_bundle(bundle_dir, digest=b.digest).digest == b.digest
    with pytest.raises(cutecall.BundleError, match="expected 0000"):
        cutecall.load_bundle(bundle_dir, digest="0" * 64)
    monkeypatch.setattr(_core, "device_arch", lambda ordinal=0: "sm_80")
    with pytest.raises(cutecall.BundleError,
                       match=r"entry 'affine'.*field 'arch' is sm_90a.*sm_80"):
        cutecall.load_bundle(bundle_dir)
    assert cutecall.load_bundle(bundle_dir, check_arch=False)
    runs = _core.arch_runs_on
    assert runs("sm_90a", "sm_90") and not runs("sm_90a", "sm_100")
    assert runs("sm_80", "sm_86") and not runs("sm_86", "sm_80")


def test_an_sm100a_bundle_is_refused_on_sm90a_naming_both(bundle_dir, monkeypatch):
    reseal(bundle_dir, lambda t: t.replace("arch sm_90a", "arch sm_100a"))
    monkeypatch.setattr(_core, "device_arch", lambda ordinal=0: "sm_90a")
    with pytest.raises(cutecall.BundleError,
                       match=r"entry 'affine'.*field 'arch' is sm_100a.*this GPU \(sm_90a\)"
                             r".*re-export the bundle for sm_90a"):
        cutecall.load_bundle(bundle_dir)
    assert cutecall.load_bundle(bundle_dir, check_arch=False).compiled("affine").arch == "sm_100a"


def test_what_a_kernel_read_of_its_device_travels_with_it(calls, tmp_path, monkeypatch):
    """CompiledKernel.device_reads is written into its entry; a GPU with
    another SM count refuses it, naming the kernel, both counts and what to
    do; entries that read nothing load anywhere their arch runs."""
    import dataclasses
    read = dataclasses.replace(calls["vector_add"].kernel, device_reads=(
        ("sm_count", 148), ("max_active_clusters(2)", 74)))
    path = tmp_path / "b"
    cutecall.export(path, {"persistent": read, "plain": calls["affine"]})
    text = (path / "manifest.txt").read_text()
    assert text.startswith("cutecall-bundle 3\n")
    assert "device-reads max_active_clusters(2)=74,sm_count=148\n" in text
    assert text.count("device-reads") == 1  # an entry that read nothing has none
    monkeypatch.setattr(_core, "device_arch", lambda ordinal=0: "sm_90a")
    b200 = {"sm_count": 148, "smem_per_block_optin": 232448, "smem_per_sm": 233472,
            "l2_bytes": 132120576, "capability": (10, 0)}
    monkeypatch.setattr(_core, "device_props", lambda ordinal=0: b200)
    b = cutecall.load_bundle(path)
    assert b.compiled("persistent").device_reads == (("max_active_clusters(2)", 74),
                                                     ("sm_count", 148))
    assert b.compiled("plain").device_reads == ()
    monkeypatch.setattr(_core, "device_props",
                        lambda ordinal=0: {**b200, "sm_count": 132})
    with pytest.raises(cutecall.BundleError) as e:
        cutecall.load_bundle(path)
    for f in (str(path), "entry 'persistent'", f"kernel '{read.name}'", "read sm_count = 148",
              "this GPU's sm_count is 132", "Re-export the bundle on this GPU, or for it"):
        assert f in str(e.value), (f, str(e.value))
    assert cutecall.load_bundle(path, check_arch=False)
    monkeypatch.setattr(_core, "device_props", lambda ordinal=0: None)  # no GPU
    assert cutecall.load_bundle(path)
    bad = dataclasses.replace(read, device_reads=(("sm count", 1),))
    with pytest.raises(cutecall.BundleError, match=r"kernel 'x'.*'sm count'"):
        cutecall.export(tmp_path / "c", {"x": bad})


def test_export_errors_and_atomicity(calls, tmp_path, monkeypatch):
    path = tmp_path / "b"
    cutecall.export(path, calls)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        cutecall.export(path, calls)
    cutecall.export(path, {"only": calls["vector_add"]}, overwrite=True)
    assert list(cutecall.load_bundle(path)) == ["only"]
    (tmp_path / "notes").mkdir()
    with pytest.raises(cutecall.BundleError, match="not a cutecall bundle"):
        cutecall.export(tmp_path / "notes", calls, overwrite=True)
    with pytest.raises(ValueError, match="kernel name 'a b'"):
        cutecall.export(tmp_path / "x", {"a b": calls["vector_add"]})
    with pytest.raises(TypeError, match="must be a CompiledCall"):
        cutecall.export(tmp_path / "x", {"a": object()})
    with pytest.raises(ValueError, match="no kernels"):
        cutecall.export(tmp_path / "x", {})

    def broken(p, data):
        raise OSError("disk full")
    monkeypatch.setattr(_bundle, "_write", broken)
    with pytest.raises(OSError, match="disk full"):
        cutecall.export(tmp_path / "x", calls)
    assert sorted(os.listdir(tmp_path)) == ["b", "notes"]  # nothing half-written


# -- without the CuTe DSL compiler ----------------------------------------------

def test_load_and_lower_without_cutlass(bundle_dir):
    out = run_python(BLOCKER + textwrap.dedent("""
        import sys, jax, jax.numpy as jnp
        import cutecall
        b = cutecall.load_bundle(sys.argv[1])
        s = jax.ShapeDtypeStruct((1000,), jnp.float32)
        text = jax.jit(lambda x, y: b["vector_add"](x, y)).trace(s, s).lower(
            lowering_platforms=("cuda",)).as_text()
        assert "@cutecall_call_v1(" in text
        loaded = [m for m in sys.modules if m == "cutlass" or m.startswith("cutlass.")]
        print("cutlass modules:", loaded)
    """), str(bundle_dir))
    assert "cutlass modules: []" in out


# -- CLI ---------------------------------------------------------------------------

def test_export_cli(tmp_path, capsys):
    source = tmp_path / "my_kernels.py"
    source.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp, cutecall
        from cutecall.examples import kernels
        def bundle_kernels():
            s = jax.ShapeDtypeStruct((256,), jnp.float32)
            like = lambda a, b: a
            return {"add": cutecall.compile(kernels.vector_add, s, s,
                                            output_shape_dtype=like),
                    "copy": cutecall.compile(kernels.copy, s,
                                             output_shape_dtype=lambda x: x)}
    """))
    out = tmp_path / "cli.bundle"
    assert _bundle.export_cli([str(out), f"{source}", "--name", "add"]) == 0
    assert list(cutecall.load_bundle(out)) == ["add"]
    assert "manifest-sha256" in capsys.readouterr().out
    assert _bundle.export_cli([str(out), str(source)]) == 1  # exists
    assert "overwrite=True" in capsys.readouterr().err
    assert _bundle.export_cli([str(out), str(source), "--overwrite"]) == 0
    assert list(cutecall.load_bundle(out)) == ["add", "copy"]
    assert _bundle.export_cli([str(out), f"{source}:nope", "--overwrite"]) == 1
    assert "defines no function 'nope'" in capsys.readouterr().err
    assert _bundle.export_cli([str(out), str(source), "--name", "mul",
                               "--overwrite"]) == 1
    assert "no kernel named 'mul'" in capsys.readouterr().err
    assert _bundle.export_cli([]) == 2


# -- jax.export ----------------------------------------------------------------

def _exported(symbolic: bool):
    from cutecall.examples import kernels
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first)
    n = jax.export.symbolic_shape("n")[0] if symbolic else 1000
    return jax.export.export(jax.jit(lambda a, b: add(a, b) * 2),
                             platforms=["cuda"],
                             disabled_checks=cutecall.jax_export_checks())(
        f32(n), f32(n))


@pytest.mark.parametrize("symbolic", [False, True], ids=["concrete", "symbolic"])
def test_jax_export_serializes_for_cuda(symbolic, tmp_path):
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs it")
    blob = tmp_path / "f.jax_export"
    blob.write_bytes(_exported(symbolic).serialize())
    out = run_python(BLOCKER + textwrap.dedent("""
        import sys, jax, cutecall
        cutecall.register()
        exp = jax.export.deserialize(open(sys.argv[1], "rb").read())
        text = exp.mlir_module()
        print("platforms", exp.platforms, "in", exp.in_avals)
        print("custom call", "@cutecall_call_v1(" in text)
    """), str(blob))
    assert "custom call True" in out
    assert ("float32[n]" if symbolic else "float32[1000]") in out


def test_jax_export_needs_the_disabled_checks():
    from cutecall.examples import kernels
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first)
    with pytest.raises(ValueError, match="cutecall_call_v1"):
        jax.export.export(jax.jit(add), platforms=["cuda"])(f32(8), f32(8))
    checks = [str(c) for c in cutecall.jax_export_checks()]
    assert any("cutecall_call_v1" in c for c in checks)


def test_bundle_entry_exports_with_symbolic_shapes(bundle_dir):
    b = cutecall.load_bundle(bundle_dir)
    n, = jax.export.symbolic_shape("n")
    exp = jax.export.export(jax.jit(lambda x, y: b["vector_add"](x, y)),
                            platforms=["cuda"],
                            disabled_checks=cutecall.jax_export_checks())(
        f32(n), f32(n))
    assert str(exp.out_avals[0]) == "float32[n]"
    assert "@cutecall_call_v1(" in exp.mlir_module()
    assert json.loads(json.dumps(b["vector_add"].contract.to_json()))


def test_a_kernel_with_pytree_arguments_exports_and_is_called_flat(tmp_path):
    """A kernel taking a NamedTuple (arrays and a runtime scalar inside)
    exports like any other; the bundle is called with the flat arrays and
    the scalar named by its key path; the recorded entry rebuilds the
    container itself."""
    from cutecall.examples import pytrees as pt
    s = f32(1000)
    k = cutecall.compile(pt.scaled_add, s, pt.Epilogue(bias=s, alpha=2.0),
                         output_shape_dtype=lambda x, e: x)
    cutecall.export(str(tmp_path / "b"), {"scaled_add": k})
    f = cutecall.load_bundle(str(tmp_path / "b"))["scaled_add"]
    assert f.scalars == (("epilogue.alpha", "Float32"),)
    for call in (lambda x, b: f(x, b, 3.0), lambda x, b: f(x, b, **{"epilogue.alpha": 3.0})):
        text = jax.jit(call).trace(s, s).lower(lowering_platforms=("cuda",)).as_text()
        assert text.count("cutecall_call") >= 1
