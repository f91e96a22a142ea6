"""Pytree arguments (``cutecall._driver.pytree``) through both fronts, on
CPU: NamedTuples, dataclasses and dicts whose leaves are arrays, runtime
scalars, None and compile-time values; what compiles once and what
compiles again; names, specs and aliases by key path; errors naming the
path. The kernels: ``cutecall.examples.pytrees``."""

import re

import jax
import jax.numpy as jnp
import pytest

import cutecall
from cutecall import TensorSpec
from cutecall._driver import pytree
from cutecall.examples import pytrees as pt

f32 = jnp.float32


def s(*shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)


def lower(call, *args, **kwargs):
    return call.lower(*args, **kwargs).as_text()


def attr(text: str, name: str) -> str:
    return re.search(rf'{name} = ("[^"]*"|[^,}}]+)', text).group(1)


def test_flatten_classifies_leaves_by_annotation():
    seen = []

    def on_scalar(path, value, scalar_type):
        seen.append((pytree.keystr(path), value, scalar_type))
        return len(seen) - 1
    epi = pt.Epilogue(bias=s(8), alpha=2.0, relu=True)
    node, arrays = pytree.flatten(epi, lambda x: isinstance(x, jax.ShapeDtypeStruct),
                                  on_scalar)
    assert [pytree.keystr(p) for p, _ in arrays] == [".bias"]
    assert seen == [(".alpha", 2.0, "Float32")]
    assert [leaf.kind for leaf in node.leaves()] == ["array", "scalar", "const"]
    rebuilt = node.rebuild(iter(["T"]), [9.0])
    assert rebuilt == pt.Epilogue("T", 9.0, True) and type(rebuilt) is pt.Epilogue
    # Unannotated numbers are compile-time; CuTe DSL values are runtime.
    import cutlass
    node, _ = pytree.flatten((3, cutlass.Int32(4)), lambda x: False, on_scalar)
    assert [leaf.kind for leaf in node.leaves()] == ["const", "scalar"]
    assert seen[-1] == ("[1]", 4, "Int32")


def test_jax_runtime_scalars_in_a_namedtuple_never_recompile(compiles):
    call = cutecall.cutlass_call(pt.scaled_add, output_shape_dtype=lambda x, e: x)
    a = lower(call, s(64), pt.Epilogue(bias=s(64), alpha=2.0))
    b = lower(call, s(64), pt.Epilogue(bias=s(64), alpha=-1.5))
    assert compiles() == 1
    assert attr(a, "key") == attr(b, "key") and attr(a, "scalars") != attr(b, "scalars")
    assert attr(a, "operands") == '"x,epilogue.bias,out"'
    # A compile-time field, or an absent optional, is another kernel.
    lower(call, s(64), pt.Epilogue(bias=s(64), alpha=2.0, relu=True))
    lower(call, s(64), pt.Epilogue(bias=None, alpha=2.0))
    assert compiles() == 3


def test_torch_runtime_scalars_in_a_namedtuple_never_recompile(compiles):
    torch = pytest.importorskip("torch")
    import cutecall.torch as ct
    k = ct.kernel(pt.scaled_add)
    x = torch.empty(64, device="meta")
    first = k.compile(x, pt.Epilogue(bias=x, alpha=2.0), x)
    again = k.compile(x, pt.Epilogue(bias=x, alpha=7.0), x)
    assert first.key == again.key and compiles() == 1
    spec, uses = k.spec_of((x, pt.Epilogue(x, 2.0, True), x),
                              [ct._describe.tensor_props(x)] * 3, "sm_90a")
    assert [op.name for op in spec.operands] == ["x", "epilogue.bias", "out"]
    # Per leaf: x, bias, alpha (scalar 0), relu (compiled in), out (written).
    assert [(int(u.kind), u.index) for u in uses] == [(0, 0), (0, 1), (1, 0), (4, 0), (3, 2)]
    assert uses[3].value is True


def test_dataclass_and_dict_pytrees(compiles):
    call = cutecall.cutlass_call(pt.scaled_add_dc, output_shape_dtype=lambda x, c: x)
    text = lower(call, s(32), pt.Scales(alpha=0.5, bias=s(32)))
    assert attr(text, "operands") == '"x,scales.bias,out"'
    # The output inside a dict: the input leaf at that key path is the
    # output (aliased), and the kernel writes through it.
    into = cutecall.cutlass_call(pt.scaled_add_into, output_shape_dtype=lambda x, e, d: x,
                                 input_output_aliases={(2, "out"): 0})
    text = lower(into, s(32), pt.Epilogue(alpha=3.0), {"out": s(32)})
    assert attr(text, "operands") == '"x,sink[\'out\']"'
    assert "output_operand_alias" in text


def test_specs_by_operand_name_and_errors_name_the_path():
    call = cutecall.cutlass_call(
        pt.scaled_add, output_shape_dtype=lambda x, e: x,
        input_spec={"epilogue.bias": TensorSpec(divisibility=1)})
    text = lower(call, s(64), pt.Epilogue(bias=s(64), alpha=2.0))
    plan = [int(v) for v in re.findall(r"-?\d+", attr(text, "plan").split(">")[0][6:])]
    assert plan  # lowered; the bias's class is 1 (the plan holds it)
    with pytest.raises(ValueError, match=r"input_spec names \['epilogue.nope'\]"):
        cutecall.cutlass_call(pt.scaled_add, output_shape_dtype=lambda x, e: x,
                              input_spec={"epilogue.nope": TensorSpec()}).lower(
            s(64), pt.Epilogue(bias=s(64)))
    with pytest.raises(ValueError, match=r"kernel 'scaled_add', input 'epilogue.bias' "
                                         r"is rank 0"):
        call.lower(s(64), pt.Epilogue(bias=s(), alpha=1.0))
    with pytest.raises(TypeError, match=r"runtime scalar 'epilogue.alpha' \(Float32\) "
                                        "must be a scalar, got str"):
        call.lower(s(64), pt.Epilogue(bias=s(64), alpha="2"))
    with pytest.raises(TypeError, match=r"argument 1 of 'scaled_add' must be an array, "
                                        "a pytree of arrays, a scalar or None, got object"):
        call.lower(s(64), object())


def test_a_traced_scalar_in_a_pytree_says_what_to_do():
    call = cutecall.cutlass_call(pt.scaled_add, output_shape_dtype=lambda x, e: x)

    def f(x, alpha):
        return call(x, pt.Epilogue(bias=x, alpha=alpha))
    with pytest.raises(TypeError, match=r"'epilogue.alpha' \(Float32\) is a traced JAX value"):
        jax.jit(f).trace(s(8), s(dtype=f32)).lower(lowering_platforms=("cuda",))
