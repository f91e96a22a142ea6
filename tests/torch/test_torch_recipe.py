"""``cutecall.torch.kernel(build, recipe=...)``: the torch front's calls keyed
by what the caller asked for. On CPU (no launch): a first ``compile`` on
meta tensors records the variant; a later one, in this process or a fresh
one with the CuTe DSL blocked, finds it with ``build`` never called and 0
compiles; the key follows dtypes, ranks, the recipe and the packages; the
C++ launch object's miss returns the recorded kernel's entry; torch.compile
builds its op from the record."""

import json
import re
import textwrap

import pytest

torch = pytest.importorskip("torch")

import cutecall  # noqa: E402
import cutecall.torch as ct  # noqa: E402
from cutecall._driver import recipe as _recipe  # noqa: E402
from cutecall._driver.call_record import TorchContract  # noqa: E402
from cutecall.torch import _recipe_find  # noqa: E402
from shared import BLOCKER, run_python  # noqa: E402

ONE_LENGTH = {"a": ("n",), "b": ("n",), "c": ("n",)}


def build():
    from cutecall.examples.kernels import vector_add
    return vector_add


def refuse():
    raise AssertionError("the launcher must not be built on a hit")


def add(builder=build, recipe=("vector_add", 1), **kw):
    return ct.kernel(builder, recipe=recipe, name="vector_add", dims=ONE_LENGTH, **kw)


def meta(n, dtype=torch.float32):
    return torch.empty(n, device="meta", dtype=dtype)


def key(k, *args):
    return k.recipe.key_of(_recipe_find.call_desc(args), k.recipe.target(None))


def test_a_recipe_compiles_once_then_serves_every_fitting_shape(compiles):
    k = add()
    assert isinstance(k, ct.RecipeKernel) and k.fn is None
    first = k.compile(meta(4096), meta(4096), meta(4096))
    assert compiles() == 1 and k.fn is not None
    again = add(refuse)
    for n in (4096, 8192, 4104):
        assert again.compile(meta(n), meta(n), meta(n)).key == first.key
    assert compiles() == 0 + 1 and again.fn is None
    assert again.output_params == ["c"]  # from the record, nothing built


def test_a_call_the_record_does_not_fit_is_compiled_and_recorded(compiles):
    add().compile(meta(4096), meta(4096), meta(4096))
    odd = add().compile(meta(4097), meta(4097), meta(4097))  # another class
    assert compiles() == 2
    assert add(refuse).compile(meta(4099), meta(4099), meta(4099)).key == odd.key
    assert compiles() == 2


def test_the_key_follows_dtypes_ranks_recipe_and_packages():
    k = add(refuse)
    base = key(k, meta(8), meta(8), meta(8))
    assert base == key(add(refuse), meta(16), meta(16), meta(16))  # extents: no
    assert base != key(k, meta(8, torch.float16), meta(8), meta(8))
    assert base != key(k, torch.empty(2, 4, device="meta"), meta(8), meta(8))
    assert base != key(add(refuse, recipe=("vector_add", 2)), meta(8), meta(8), meta(8))
    assert base != key(add(refuse, recipe_packages=("jax",)), meta(8), meta(8), meta(8))
    assert base != key(add(refuse, static=True), meta(8), meta(8), meta(8))
    assert base != key(k, meta(8), meta(8), None)


def test_the_key_is_the_same_in_another_process():
    code = textwrap.dedent("""
        import torch, cutecall.torch as ct
        from cutecall.torch import _recipe_find
        k = ct.kernel(lambda: None, recipe=("vector_add", 1), name="vector_add",
                      dims={"a": ("n",), "b": ("n",), "c": ("n",)})
        m = torch.empty(8, device="meta")
        print(k.recipe.key_of(_recipe_find.call_desc((m, m, m)), k.recipe.target(None)))
    """)
    k = ct.kernel(lambda: None, recipe=("vector_add", 1), name="vector_add", dims=ONE_LENGTH)
    assert run_python(code).strip() == key(k, meta(8), meta(8), meta(8))


def test_the_record_holds_a_torch_contract(compiles):
    k = add()
    m = meta(4096)
    compiled = k.compile(m, m, m)
    target = k.recipe.target(None)
    (variant,) = _recipe.load(key(k, m, m, m), target.arch)
    assert variant.contract is None and variant.key == compiled.key
    c = variant.torch
    assert c.outputs == ("c",) and [p[0] for p in c.params] == ["a", "b", "c"]
    assert [u[0] for u in c.uses] == ["TENSOR", "TENSOR", "OUTPUT"]
    assert TorchContract.from_json(json.loads(json.dumps(c.to_json()))) == c
    doc = variant.to_json()
    assert "torch" in doc and "jax" not in doc
    assert _recipe.Variant.from_json(doc) == variant


def test_allocate_records_where_its_outputs_go(compiles):
    alloc = dict(allocate=lambda a, b: torch.empty_like(a))
    add(**alloc).compile(meta(4096), meta(4096))
    assert compiles() == 1
    served = add(refuse, **alloc)
    outs = (meta(4096),)
    assert served._positions_of((meta(4096), meta(4096)), outs) == (2,)
    assert served.num_outputs == 1 and served.fn is None
    with pytest.raises(ValueError, match="returned 2 tensors, expected 1"):
        served._positions_of((meta(4096), meta(4096)), outs * 2)


def test_a_miss_of_the_launch_object_returns_the_recorded_entry(compiles, monkeypatch):
    m = meta(4096)
    compiled = add().compile(m, m, m)
    k = add(refuse)
    monkeypatch.setattr(ct.RecipeKernel, "_on_one_device", staticmethod(lambda args: True))
    entry = k._on_miss((m, m, m), [None, None, None])
    assert entry.sha256 == compiled.sha256 and k.fn is None
    assert [(int(u.kind), u.index) for u in entry.uses] == [(0, 0), (0, 1), (3, 2)]
    assert compiles() == 1


def test_recipes_off_take_the_full_path(compiles, monkeypatch):
    m = meta(4096)
    add().compile(m, m, m)
    monkeypatch.setenv("CUTECALL_RECIPES", "0")
    k = add()
    k.compile(m, m, m)
    assert k.fn is not None  # built: no lookup
    with pytest.raises(AssertionError, match="must not be built"):
        add(refuse).compile(m, m, m)


def test_a_warm_process_imports_neither_the_dsl_nor_build(compiles):
    m = meta(4096)
    add(recipe=("warm", 1)).compile(m, m, m)
    # torch's import asks whether the DSL is installed (find_spec): torch
    # first, then every import of the DSL fails.
    code = "import torch\n" + BLOCKER + textwrap.dedent("""
        import sys, torch, cutecall, cutecall.torch as ct
        from cutecall.torch import RecipeKernel
        def build():
            raise AssertionError("the launcher must not be built on a hit")
        k = ct.kernel(build, recipe=("warm", 1), name="vector_add",
                      dims={"a": ("n",), "b": ("n",), "c": ("n",)})
        m = torch.empty(1 << 20, device="meta")
        k.compile(m, m, m)
        RecipeKernel._on_one_device = staticmethod(lambda args: True)
        entry = k._on_miss((m, m, m), [None] * 3)
        loaded = sorted(x for x in sys.modules if x.split(".")[0] == "cutlass")
        print(cutecall.compile_stats()["compiles"], k.fn, loaded)
    """)
    assert run_python(code).split() == ["0", "None", "[]"]


def test_torch_compile_builds_its_op_from_the_record(compiles):
    """The op's schema (parameters, ``c`` mutated) comes from the record:
    the launcher is never built. The launch itself does nothing here."""
    from torch._dynamo.backends.common import aot_autograd
    add().compile(meta(64), meta(64), meta(64))
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm.code)
        return gm
    k = add(refuse)
    k.launch = lambda *args: None

    def f(a, b):
        out = torch.empty_like(a)
        k(a, b, out)
        return out * 2
    torch.compile(f, backend=aot_autograd(fw_compiler=keep), fullgraph=True)(meta(64), meta(64))
    (graph,) = graphs
    assert re.search(r"auto_functionalized\w*\(torch\.ops\.cutecall\.vector_add_\d+\.default, "
                     r"a = \w+, b = \w+, _c_base_index = 0", graph), graph
    assert k.fn is None and compiles() == 1


def test_a_recipe_needs_content_values():
    with pytest.raises(TypeError, match="recipe"):
        add(recipe=object())
