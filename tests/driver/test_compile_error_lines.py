"""A failed compile's first line says which kernel, where in the user's
source and why: ``cutecall: kernel 'K' failed to compile for sm_90a at
failing_kernels.py:30 (in typo_launcher): NameError: ...`` -- not the
generated entry point (``cutecall_entry``) nor the DSL's own files. An MLIR
verifier's error, whose ops carry no location, is traced once more with the
DSL's traceback locations to find the line (once per failed form)."""

import re

import pytest

import cutecall
from cutecall._driver import compile_error as ce, compile_locate, user_frames

import failing_kernels as fk


def first_line(error) -> str:
    return str(error).splitlines()[0]


def where(function: str, line_of: str | None = None) -> str:
    line = fk.failing_line(line_of or function)
    return rf" at \S*failing_kernels\.py:{line} \(in {function}\): "


def lower(launcher):
    jax = pytest.importorskip("jax")
    call = cutecall.cutlass_call(launcher, output_shape_dtype=lambda a: a,
                                 static_fallback=False)
    return call.lower(jax.ShapeDtypeStruct((32,), "float32"))


def test_a_name_error_in_the_launcher_names_its_line(fresh_key_space):
    with pytest.raises(cutecall.CompileError) as e:
        lower(fk.typo_launcher)
    head = first_line(e.value)
    assert re.fullmatch(r"cutecall: kernel 'typo_launcher' failed to compile for sm_\w+"
                        + where("typo_launcher")
                        + r"NameError: name 'numthreads' is not defined", head), head
    assert "cutecall_entry" not in head
    assert e.value.location.endswith(f"failing_kernels.py:{fk.failing_line('typo_launcher')}"
                                     " (in typo_launcher)")
    assert "numthreads" in e.value.source_line


@pytest.mark.parametrize("library_wraps_indexing", [False, True])
def test_an_mlir_verifier_error_is_traced_to_the_users_line(compiles, monkeypatch,
                                                            library_wraps_indexing):
    if library_wraps_indexing:  # QuACK patches cute.Tensor.__setitem__ when imported:
        pytest.importorskip("quack.dsl.cute_tensor_indexing")  # its frame is not the user's
    monkeypatch.setattr(compile_locate, "_found", type(compile_locate._found)())
    traces = []
    retrace = compile_locate.retrace
    monkeypatch.setattr(compile_locate, "retrace",
                        lambda *a: traces.append(a) or retrace(*a))
    for _ in range(2):  # the same call again: the place is remembered
        with pytest.raises(cutecall.CompileError) as e:
            lower(fk.congruence_launcher)
        head = first_line(e.value)
        assert re.match(r"cutecall: kernel 'congruence_launcher' failed to compile for "
                        r"sm_\w+" + where("_rank3_store_kernel")
                        + r"Verification failed: 'cute.memref.store' op expects coordinate "
                        r"to be weakly congruent to the layout", head), head
    assert len(traces) == 1  # the place is kept by the form's key
    assert "error: unknown:" in e.value.dsl_message  # the DSL's own message follows


def test_the_torch_front_names_the_line_too(fresh_key_space):
    torch = pytest.importorskip("torch")
    import cutecall.torch
    k = cutecall.torch.kernel(fk.typo_launcher, static_fallback=False)
    meta = torch.empty(32, device="meta")
    with pytest.raises(cutecall.CompileError) as e:
        k.compile(meta, meta)
    assert re.match(r"cutecall: kernel 'typo_launcher' failed to compile for sm_\w+"
                    + where("typo_launcher") + "NameError", first_line(e.value))


# -- reading places from the DSL's messages (no compile) ----------------------

CHAIN = ('Verification failed:\nerror: callsite("_Tensor.__setitem__"("{dsl}/cute/tensor.py"'
         ':465:12 to :75) at callsite("my_kernel.<locals>.if_region_0"("/work/k.py":20:4 to '
         ':19) at callsite("my_launcher"("/work/k.py":25:4 to :83) at "{dsl}/dsl.py":3:1))): '
         "'cute.memref.store' op expects coordinate to be weakly congruent")


def test_a_location_chain_gives_the_innermost_user_frame():
    pytest.importorskip("cutlass")
    dsl = user_frames.package_dirs(("cutlass",))[0].rstrip("/")
    exc = RuntimeError(CHAIN.format(dsl=dsl))
    assert user_frames.user_location(exc) == "/work/k.py:20 (in my_kernel)"
    assert ce.root_cause(exc) == ("Verification failed: 'cute.memref.store' op expects "
                                  "coordinate to be weakly congruent")


def test_an_error_without_a_place_is_unlocated():
    error = ce.CompileError("x", dsl_message="error: IR verification failed: error: unknown: "
                                             "'cute.copy' op cannot vectorize")
    assert ce.unlocated(error)
    moved = error.relocated("k.py:3 (in k)")
    assert moved.location == "k.py:3 (in k)" and not ce.unlocated(moved)
    assert first_line(moved) == "cutecall: kernel '' failed to compile for  at k.py:3 (in k): x"
