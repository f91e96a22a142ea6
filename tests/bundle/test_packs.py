"""Kernel packs: ``cutecall pack build`` compiles a source's recipe calls
into a bundle plus a table from recipe keys to its entries; a clean process
with an empty store loads from the pack (``$CUTECALL_PACKS``, or after
``cutecall pack install``) with 0 compiles and the CuTe DSL blocked. A pack
changed after it was built is refused by name."""

import json
import os
import textwrap

import pytest

from cutecall.bundle import _pack, _pack_cli
from cutecall._driver import packs
from shared import BLOCKER, run_python

SOURCE = textwrap.dedent('''
    import jax, jax.numpy as jnp, cutecall

    def build():
        from cutecall.examples.kernels import vector_add
        return vector_add

    def add_call():
        n = cutecall.TensorSpec(dims=("n",))
        return cutecall.cutlass_call(
            build, recipe=("pack-test", 1), name="vector_add", input_spec=n,
            output_spec=n,
            output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype))

    def lower(n):
        s = jax.ShapeDtypeStruct((n,), jnp.float32)
        return jax.jit(lambda a, b: add_call()(a, b) * 2).trace(s, s).lower(
            lowering_platforms=("cuda",)).as_text()

    def configs(arch, sizes=(4096,)):
        for n in sizes:
            yield lambda n=n: lower(n)
''')

CLEAN = BLOCKER + textwrap.dedent('''
    import sys, cutecall, pack_source
    assert "cutecall_call" in pack_source.lower(1 << 20)
    loaded = [m for m in sys.modules if m.split(".")[0] in ("cutlass", "torch")]
    print(cutecall.compile_stats()["compiles"], cutecall.compile_stats()["disk_hits"], loaded)
''')


@pytest.fixture
def source(tmp_path, monkeypatch):
    (tmp_path / "pack_source.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    import pack_source
    return pack_source


def clean_process(monkeypatch, store, **env):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(store))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return run_python(CLEAN).strip().split(maxsplit=2)


def test_a_pack_serves_a_clean_process_with_no_compile(source, tmp_path, monkeypatch,
                                                       compiles):
    pack = tmp_path / "packs" / "vector.pack"  # its folder made on the way
    assert _pack_cli.main(["build", "pack_source:configs", "--arch", "sm_90a,sm_100a",
                           "--out", str(pack)]) == 0
    table = packs.read_table(str(pack))
    assert table["archs"] == ["sm_90a", "sm_100a"] and table["kernels"] == 2
    assert len(table["recipes"]) == 2 and compiles() == 2
    # Used in place: an empty store, the pack on CUTECALL_PACKS.
    got = clean_process(monkeypatch, tmp_path / "empty", CUTECALL_PACKS=str(pack),
                        CUTECALL_ARCH="sm_90a")
    assert got == ["0", "0", "[]"]
    # Installed into a store: found there without the pack.
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "installed"))
    assert _pack_cli.main(["install", str(pack)]) == 0
    monkeypatch.delenv("CUTECALL_PACKS", raising=False)
    got = clean_process(monkeypatch, tmp_path / "installed", CUTECALL_ARCH="sm_100a")
    assert got == ["0", "1", "[]"]


def test_a_changed_pack_is_refused_by_name(source, tmp_path, compiles):
    pack = tmp_path / "p"
    _pack.build_pack(str(pack), source.configs, archs=["sm_90a"])
    doc = json.loads((pack / packs.TABLE).read_text())
    doc["recipes"] = {k.replace("0", "1", 1): v for k, v in doc["recipes"].items()}
    (pack / packs.TABLE).write_text(json.dumps(doc))
    with pytest.raises(packs.PackError, match="pack-sha256"):
        packs.read_table(str(pack))
    assert _pack_cli.main(["show", str(pack)]) == 1


def test_a_source_that_makes_no_recipe_call_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no recipe calls"):
        _pack.build_pack(str(tmp_path / "p"), lambda arch: iter(()), archs=["sm_90a"])
    assert _pack_cli.main(["build", "nomodule", "--arch", "sm_90a", "--out",
                           str(tmp_path / "q")]) == 1


def test_an_existing_pack_is_refused_before_any_compile(source, tmp_path, compiles):
    (tmp_path / "p").mkdir()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        _pack.build_pack(str(tmp_path / "p"), source.configs, archs=["sm_90a"])
    assert compiles() == 0
