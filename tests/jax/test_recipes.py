"""``cutlass_call(build, recipe=...)``: a warm call keyed by what the caller
asked for. A process whose store holds the kernel lowers the call with
neither the launcher's library nor the CuTe DSL imported, and compiles
nothing; a call the record does not fit takes the full path and is
recorded too."""

import textwrap

import jax
import jax.numpy as jnp
import pytest

import cutecall
from cutecall._driver import recipe as _recipe
from shared import BLOCKER, run_python


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def build():
    from cutecall.examples.kernels import vector_add
    return vector_add


def add_call(recipe=("vector_add", 1), **kw):
    n = cutecall.TensorSpec(dims=("n",))
    return cutecall.cutlass_call(
        build, recipe=recipe, name="vector_add", input_spec=n, output_spec=n,
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype), **kw)


def lower(call, *specs):
    return jax.jit(lambda *a: call(*a)).trace(*specs).lower(
        lowering_platforms=("cuda",)).as_text()


def test_a_recipe_compiles_once_then_serves_every_fitting_shape(compiles):
    call = add_call()
    assert isinstance(call, cutecall.jax.RecipeCall)
    assert call.fn is None  # nothing built yet
    assert "cutecall_call" in lower(call, f32(4096), f32(4096))
    assert compiles() == 1 and call.fn is not None
    # A new call site with the same recipe: served from the record.
    again = add_call()
    for n in (4096, 8192, 4104):
        assert "cutecall_call" in lower(again, f32(n), f32(n))
    assert compiles() == 1 and again.fn is None  # its launcher never built


def test_a_call_the_record_does_not_fit_is_compiled_and_recorded(compiles):
    lower(add_call(), f32(4096), f32(4096))
    call = add_call()
    lower(call, f32(4097), f32(4097))  # another divisibility class
    assert compiles() == 2
    lower(add_call(), f32(4099), f32(4099))  # now recorded: fits
    assert compiles() == 2


def test_other_recipe_values_or_options_are_other_records(compiles):
    lower(add_call(), f32(4096), f32(4096))
    other = add_call(recipe=("vector_add", 2))
    lower(other, f32(4096), f32(4096))
    assert other.fn is not None  # a miss: built and (found by key) loaded
    graphless = add_call(allow_cuda_graph=False)
    lower(graphless, f32(4096), f32(4096))
    assert graphless.fn is not None
    assert "cutecall_call_no_graph" in lower(add_call(allow_cuda_graph=False),
                                             f32(4096), f32(4096))


def test_the_key_covers_the_installed_files_of_the_packages():
    digest = _recipe.package_digest("cutecall")
    assert digest and digest.startswith(cutecall.__version__ + ":")
    assert _recipe.package_digest("no-such-distribution") is None
    key = dict(name="k", call=[], target={"arch": "sm_90a"})
    assert _recipe.recipe_key(1, **key) != _recipe.recipe_key(1, packages=("jax",), **key)
    assert _recipe.recipe_key(1, **key) != _recipe.recipe_key(2, **key)


def test_a_recipe_needs_content_values():
    with pytest.raises(TypeError, match="recipe"):
        add_call(recipe=object())


def test_a_warm_process_imports_neither_the_dsl_nor_the_library(compiles):
    """The store is the session's: a first process compiles, a fresh one
    with the CuTe DSL blocked lowers from the record."""
    lower(add_call(recipe=("warm", 1)), f32(4096), f32(4096))
    code = BLOCKER + textwrap.dedent("""
        import sys, jax, jax.numpy as jnp, cutecall
        def build():
            raise AssertionError("the launcher must not be built on a hit")
        n = cutecall.TensorSpec(dims=("n",))
        call = cutecall.cutlass_call(
            build, recipe=("warm", 1), name="vector_add", input_spec=n, output_spec=n,
            output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype))
        s = jax.ShapeDtypeStruct((1 << 20,), jnp.float32)
        text = jax.jit(lambda a, b: call(a, b) * 2).trace(s, s).lower(
            lowering_platforms=("cuda",)).as_text()
        assert "cutecall_call" in text
        loaded = sorted(m for m in sys.modules
                        if m.split(".")[0] in ("cutlass", "torch", "quack", "flash_attn"))
        print(cutecall.compile_stats()["compiles"], loaded)
    """)
    assert run_python(code).split() == ["0", "[]"]


def test_vmap_of_a_served_call_folds_as_the_full_path_does(compiles):
    """The record keeps the vmap declaration (as a bundle's contract does):
    one launch on the whole batch, from the record too."""
    lower(add_call(batch_modes=0), f32(4096), f32(4096))
    served = add_call(batch_modes=0)
    text = jax.jit(jax.vmap(served)).trace(f32(8, 4096), f32(8, 4096)).lower(
        lowering_platforms=("cuda",)).as_text()
    assert text.count("cutecall_call") == 1 and served.fn is None
    assert "tensor<32768xf32>" in text  # folded: (8, 4096) -> (32768,)
    assert compiles() == 1


def test_a_host_with_an_empty_store_finds_the_recipe_in_the_remote_tier(
        compiles, tmp_path, monkeypatch):
    """Records travel with the kernels: a process whose local store is
    empty fetches both from a file:// remote tier, and compiles nothing."""
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", (tmp_path / "remote").as_uri())
    monkeypatch.setenv("CUTECALL_CACHE_SIGNING_KEY", "recipes-test-key")
    code = textwrap.dedent("""
        import sys, jax, jax.numpy as jnp, cutecall
        def build():
            from cutecall.examples.kernels import vector_add
            return vector_add
        n = cutecall.TensorSpec(dims=("n",))
        call = cutecall.cutlass_call(
            build, recipe=("remote", 1), name="vector_add", input_spec=n, output_spec=n,
            output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype))
        s = jax.ShapeDtypeStruct((4096,), jnp.float32)
        jax.jit(call).trace(s, s).lower(lowering_platforms=("cuda",))
        stats = cutecall.compile_stats()
        print(stats["compiles"], stats["remote_hits"] + stats["disk_hits"],
              "cutlass" in sys.modules)
    """)
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "host-a"))
    assert run_python(code).split() == ["1", "0", "True"]
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "host-b"))
    assert run_python(BLOCKER + code).split() == ["0", "1", "False"]


def test_a_recipe_fact_is_computed_once_across_processes(fresh_key_space):
    """What a library answers (tile sizes, say) is remembered like a recipe:
    a fresh process gets it from the store without calling compute()."""
    calls = []
    value = cutecall.recipe_fact("tiles", ("sm_90a", 128), lambda: calls.append(1) or
                                 {"tile_m": 128, "tile_n": [64, 128]})
    assert value == {"tile_m": 128, "tile_n": [64, 128]} and calls == [1]
    assert cutecall.recipe_fact("tiles", ("sm_90a", 128), lambda: calls.append(2)) == value
    assert calls == [1]
    code = textwrap.dedent("""
        import cutecall
        def compute():
            raise AssertionError("computed again")
        print(cutecall.recipe_fact("tiles", ("sm_90a", 128), compute)["tile_m"])
    """)
    assert run_python(code).strip() == "128"
