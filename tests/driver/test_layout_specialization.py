"""Layout specialization and the static fallback, on CPU (the DSL compiles
for sm_90a without a GPU). Kernels: cutecall.examples.specialization, each
of which compiles only when cutecall tells the DSL enough."""

import random
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import cutecall
import cutecall.torch as ct
from cutecall import TensorSpec, _core
from cutecall._driver import layout as _layout
from cutecall._driver.plan import decode_plan
from cutecall.examples import layouts
from cutecall.examples import specialization as sp

bf16, f32 = jnp.bfloat16, jnp.float32


def s(*shape, dtype=bf16):
    return jax.ShapeDtypeStruct(shape, dtype)


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def rows(x):
    return jax.ShapeDtypeStruct((x.shape[0],), jnp.float32)


def dyn(call, *args):
    """Per operand, the plan's (dim, divisibility, symbol) entries."""
    text = call.lower(*args).as_text()
    body = re.search(r"plan = dense<([^>]*)>", text).group(1).strip("[]")
    return [op["dynamic"] for op in decode_plan(
        [int(v) for v in body.split(",")])]


# -- the classes ------------------------------------------------------------

def test_python_and_cpp_classes_agree():
    rng = random.Random(0)
    for _ in range(500):
        rank = rng.randint(1, 4)
        shape = [rng.choice([0, 1, 3, 8, 12, 96, 100, 1000, 4096, 4099,
                             rng.randint(0, 5000)]) for _ in range(rank)]
        strides = [rng.choice([0, 1, 2, 6, 24, 4096, rng.randint(1, 9000)])
                   for _ in range(rank)]
        bits = rng.choice([8, 16, 32, 64])
        address = rng.choice([0, 2, 4, 8, 16, 48, 1 << 20]) + 0x7f0000000000
        p = _core.layout_props(shape, strides, address, bits)
        align, wide = p.align, p.wide
        ext, stride = p.extent_classes, p.stride_classes
        cap = _layout.class_cap(bits)
        assert ext == tuple(_layout.divisibility_class(v, cap) for v in shape)
        assert stride == tuple(_layout.divisibility_class(v, cap) for v in strides)
        assert align == _layout.divisibility_class(address, 16)
        assert not wide


def test_the_plan_carries_each_extents_class():
    call = cutecall.cutlass_call(sp.row_copy_vec, output_shape_dtype=like)
    assert dyn(call, s(100, 64)) == [[(0, 4, -1), (1, 8, -1)]] * 2
    assert dyn(call, s(96, 4096)) == [[(0, 8, -1), (1, 8, -1)]] * 2


def test_one_compile_per_class_and_a_new_one_for_another(compiles):
    call = cutecall.cutlass_call(sp.row_copy_vec, output_shape_dtype=like)
    call.lower(s(1000, 64))
    n = compiles()
    for shape in [(1000, 128), (8, 4096), (24, 8)]:  # classes (8, 8)
        call.lower(s(*shape))
    assert compiles() == n
    call.lower(s(1001, 64))  # M of class 1: one more compile
    assert compiles() == n + 1


# -- why: vectorized kernels need it -----------------------------------------

def test_vectorized_kernel_needs_the_classes():
    plain = TensorSpec(divisibility=1)
    call = cutecall.cutlass_call(sp.row_copy_vec, output_shape_dtype=like,
                                 input_spec=plain, output_spec=plain,
                                 static_fallback=False)
    with pytest.raises(cutecall.CompileError) as e:
        call.lower(s(100, 64))
    first = str(e.value).splitlines()[0]
    assert re.match(r"cutecall: kernel 'row_copy_vec' failed to compile for sm_90a "
                    r"at \S*specialization.py:\d+ \(in \w+\): ", first), first
    assert "alignment (16 bits) does not meet requirement (128 bits)" in first
    assert e.value.root_cause in first and e.value.kernel == "row_copy_vec"
    assert "launcher parameters: stream=stream, x=input 0, out=output 0" \
        in str(e.value)
    assert "\x1b[" not in str(e.value)  # the DSL's colors are stripped
    assert "Verification failed" in e.value.dsl_message or \
        "IR verification" in e.value.dsl_message


def test_a_row_length_outside_the_kernels_contract_is_a_compile_error():
    # N = 36 bf16: rows are 8-byte aligned at best; no form can vectorize.
    call = cutecall.cutlass_call(sp.row_copy_vec, output_shape_dtype=like)
    with pytest.raises(cutecall.CompileError, match="no static form compiled"):
        call.lower(s(100, 36))


def test_pointer_alignment_is_a_torch_specialization(compiles):
    k = ct.kernel(layouts.copy2d)
    a16 = ct.TensorDesc((64, 64), torch.float32)
    a4 = ct.TensorDesc((64, 64), torch.float32, align=4)
    k16, k4 = k.compile(a16, a16), k.compile(a4, a16)
    assert k16.key != k4.key
    spec16, _ = k.spec_of((a16, a16), [ct._describe.tensor_props(a16)] * 2,
                             "sm_90a")
    spec4, _ = k.spec_of((a4, a16), [ct._describe.tensor_props(a4),
                                        ct._describe.tensor_props(a16)], "sm_90a")
    assert spec16.operands[0].align == 16 and spec4.operands[0].align == 4


def test_torch_compile_ahead_of_time(compiles):
    k = ct.kernel(sp.row_copy_vec)
    meta = torch.empty(1000, 64, dtype=torch.bfloat16, device="meta")
    kernel = k.compile(meta, torch.empty_like(meta))
    assert isinstance(kernel, cutecall.CompiledKernel)
    n = compiles()
    # The same classes, described or meta, strided or not: no compile.
    desc = ct.TensorDesc((8, 4096), torch.bfloat16)
    assert k.compile(desc, desc).key == kernel.key
    padded = torch.empty(1000, 128, dtype=torch.bfloat16, device="meta")[:, :64]
    assert k.compile(padded, meta).key == kernel.key
    assert compiles() == n
    # A row stride of another class is another specialization: one this
    # kernel cannot vectorize (68 bf16 = 8-byte aligned rows) is a compile
    # error, never a launch under a false assumption.
    odd = ct.TensorDesc((1000, 64), torch.bfloat16, strides=(68, 1))
    with pytest.raises(cutecall.CompileError, match="alignment"):
        k.compile(odd, meta)
    copy = ct.kernel(layouts.copy2d)
    assert copy.compile(odd, meta).key != copy.compile(meta, meta).key


def test_torch_compile_allocates_outputs_on_meta():
    k = ct.kernel(sp.row_copy_vec, allocate=lambda x: torch.empty_like(x))
    meta = torch.empty(64, 64, dtype=torch.bfloat16, device="meta")
    assert k.compile(meta).key == ct.kernel(sp.row_copy_vec).compile(meta, meta).key


def test_torch_compile_errors_name_the_argument():
    k = ct.kernel(sp.row_copy_vec)
    with pytest.raises(TypeError, match="argument 'x' of 'row_copy_vec' must be"):
        k.compile("x", torch.empty(2, 8, device="meta"))
    with pytest.raises(TypeError, match="TensorDesc dtype torch.complex64"):
        ct.TensorDesc((4,), torch.complex64)
    with pytest.raises(ValueError, match="strides .* do not match shape"):
        ct.TensorDesc((4, 4), torch.float32, strides=(1,))
    with pytest.raises(ValueError, match="align must be a power of two"):
        ct.TensorDesc((4,), torch.float32, align=12)


# -- the static fallback -------------------------------------------------------

def test_fallback_keeps_the_batch_dynamic_and_warns_once(compiles):
    before = cutecall.compile_stats()["static_fallbacks"]
    call = cutecall.cutlass_call(sp.row_sum_unrolled, output_shape_dtype=rows,
                                 name="row_sum_unrolled_jax")
    with pytest.warns(cutecall.StaticFallbackWarning) as w:
        call.lower(s(1000, 16, dtype=f32))
    message = str(w[0].message)
    assert "kernel 'row_sum_unrolled_jax' does not compile with dynamic layouts" \
        in message
    assert "static extents 16 (x dim 1), the rest dynamic" in message
    assert "input_spec=(TensorSpec(static=(False, True)),)" in message
    assert "CUTECALL_STATIC_FALLBACK=0" in message
    assert w[0].filename == __file__  # points at the user's line
    assert cutecall.compile_stats()["static_fallbacks"] == before + 1
    n = compiles()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per kernel
        call.lower(s(1008, 16, dtype=f32))  # M in the same class: no compile
        assert compiles() == n
        call.lower(s(1000, 32, dtype=f32))  # another N: compiled static
    assert compiles() == n + 1
    assert dyn(call, s(1000, 16, dtype=f32))[0] == [(0, 8 // 2, -1)]


def test_the_suggested_spec_compiles_without_a_warning():
    call = cutecall.cutlass_call(
        sp.row_sum_unrolled, output_shape_dtype=rows,
        input_spec=(TensorSpec(static=(False, True)),))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "cutecall_call" in call.lower(s(64, 8, dtype=f32)).as_text()


def test_fallback_climbs_to_every_extent_static():
    call = cutecall.cutlass_call(sp.tile_scale_load, output_shape_dtype=like)
    with pytest.warns(cutecall.StaticFallbackWarning,
                      match="every extent .* static.*use_static_tensors=True"):
        call.lower(s(4, 8, dtype=f32))
    assert dyn(call, s(4, 8, dtype=f32)) == [[], []]


def test_fallback_off_raises_the_dynamic_error(monkeypatch):
    call = cutecall.cutlass_call(sp.row_sum_unrolled, output_shape_dtype=rows,
                                 static_fallback=False)
    with pytest.raises(cutecall.CompileError,
                       match="row_sum_unrolled' failed to compile .*Runtime value"):
        call.lower(s(64, 4, dtype=f32))
    monkeypatch.setenv("CUTECALL_STATIC_FALLBACK", "0")
    env = cutecall.cutlass_call(sp.row_sum_unrolled, output_shape_dtype=rows)
    with pytest.raises(cutecall.CompileError):
        env.lower(s(64, 4, dtype=f32))
    with pytest.raises(TypeError, match="static_fallback must be a bool"):
        cutecall.cutlass_call(sp.row_sum_unrolled, output_shape_dtype=rows,
                              static_fallback="yes")


def test_torch_fallback_compiles_the_same_rung_and_keys_exact_extents():
    k = ct.kernel(sp.row_sum_unrolled, name="row_sum_unrolled_torch")
    x = torch.empty(1000, 16, device="meta")
    with pytest.warns(cutecall.StaticFallbackWarning,
                      match=r"static=\{'x': \(False, True\)\}"):
        first = k.compile(x, torch.empty(1000, device="meta"))
    assert k.static_masks == [0b10, 0]  # x's extent 1 joins the signature
    again = k.compile(torch.empty(1008, 16, device="meta"),
                      torch.empty(1008, device="meta"))
    assert again.key == first.key
    other = k.compile(torch.empty(1000, 8, device="meta"),
                      torch.empty(1000, device="meta"))
    assert other.key != first.key


def test_torch_static_option():
    k = ct.kernel(sp.tile_scale_load, static=True)
    assert k.static_masks == [0xffff, 0xffff]
    x = torch.empty(4, 8, device="meta")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k.compile(x, torch.empty_like(x))
    partial = ct.kernel(sp.row_sum_unrolled, static={"x": (False, True)})
    assert partial.static_masks == [0b10, 0]
    with pytest.raises(ValueError, match="static names 'y'"):
        ct.kernel(sp.row_sum_unrolled, static={"y": True})
    with pytest.raises(TypeError, match=r"static\['x'\] must be True"):
        ct.kernel(sp.row_sum_unrolled, static={"x": 3})


FALLBACK_CHILD = """
import json, warnings, jax, jax.numpy as jnp, cutecall
from cutecall.examples import specialization as sp
call = cutecall.cutlass_call(sp.row_sum_unrolled, output_shape_dtype=lambda x:
    jax.ShapeDtypeStruct((x.shape[0],), jnp.float32))
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    call.lower(jax.ShapeDtypeStruct((64, 12), jnp.float32))
print(json.dumps([cutecall.compile_stats(), [str(m.message) for m in w]]))
"""


def test_a_rejection_is_recorded_for_later_processes(tmp_path):
    """The second process neither compiles the rejected dynamic form again
    nor the static one (a disk hit); it still warns, with the recorded
    cause."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, CUTECALL_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", FALLBACK_CHILD], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    (first, w1), (second, w2) = runs
    assert (first["compiles"], first["disk_hits"]) == (2, 0)  # failed + rung 1
    assert (second["compiles"], second["disk_hits"]) == (0, 1)
    assert "Runtime value" in w1[0]
    assert "recorded by an earlier process" in w2[0]
