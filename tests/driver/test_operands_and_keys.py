"""Operand specs, the plan encoding and the specialization key (no DSL)."""

from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cutecall import TensorSpec, _core
from cutecall._driver import key as _key_module
from cutecall._driver.fingerprint import fingerprint, launcher_fingerprint
from cutecall._driver.operand import make_operand
from cutecall._driver.plan import PLAN_VERSION, encode_plan
from cutecall.jax._args import describe, xla_layout


def op(name="x", shape=(4, 8), dtype=jnp.float32, spec=None, source=0, index=0):
    """The operand a cutlass_call array compiles to (the JAX front's
    description, checked and built by the driver)."""
    x = jax.ShapeDtypeStruct(shape, dtype)
    return make_operand(describe(name, source, index, x, spec, False, None))


def test_default_operand_is_dynamic_row_major():
    o = op()
    assert o.static_shape == (None, None)
    assert o.divisibility == (4, 4)  # f32 (4, 8): each extent's class, cap 4
    assert o.order == (1, 0)  # CuTe stride ranks: dim 1 fastest
    assert xla_layout(o) == (1, 0)
    assert o.cutlass_dtype == "Float32" and o.elem_bytes == 4


@pytest.mark.parametrize("shape, dtype, classes", [
    ((1000, 4096), jnp.bfloat16, (8, 8)),   # cap: 16 bytes of bf16
    ((1000, 4096), jnp.float32, (4, 4)),
    ((17, 6), jnp.float32, (1, 2)),
    ((0, 24), jnp.int8, (16, 8)),           # 0 divides by anything
    ((48,), jnp.float64, (2,)),
])
def test_default_divisibility_is_the_extent_class(shape, dtype, classes):
    assert op(shape=shape, dtype=dtype).divisibility == classes


def test_explicit_divisibility_overrides_the_class():
    assert op(shape=(1024, 1024), spec=TensorSpec(divisibility=1)).divisibility \
        == (1, 1)
    assert op(shape=(64, 64), spec=TensorSpec(static=(True, False))) \
        .divisibility == (1, 4)  # static dims carry no class


def test_symbolic_extents_have_class_one():
    import jax
    (n,) = jax.export.symbolic_shape("n")
    assert op(shape=(n, 64)).divisibility == (1, 4)


def test_static_and_divisibility_per_dim():
    o = op(spec=TensorSpec(static=(True, False), divisibility=(2, 4)))
    assert o.static_shape == (4, None)
    assert o.divisibility == (1, 4)  # checked (4 % 2), then compiled in


@pytest.mark.parametrize("spec, match", [
    (TensorSpec(divisibility=(1, 2, 3)), "3 entries for a rank-2"),
    (TensorSpec(divisibility=0), "must be >= 1"),
    (TensorSpec(static=True, divisibility=3), "dim 0 = 4 is not divisible by 3"),
    (TensorSpec(layout=(0, 0)), "not a permutation"),
    (TensorSpec(mode=(2, 0)), "not a permutation"),
    (TensorSpec(ptr_assumed_align=24), "power of two"),
])
def test_bad_specs_name_argument_and_value(spec, match):
    with pytest.raises(ValueError, match=match) as e:
        op(name="lhs", spec=spec)
    assert "lhs" in str(e.value)


def test_unsupported_dtype_and_rank():
    with pytest.raises(TypeError, match="complex64"):
        op(dtype=jnp.complex64)
    with pytest.raises(ValueError, match="rank 0"):
        op(shape=())


def test_column_major_layout_maps_to_xla():
    o = op(spec=TensorSpec(layout=(0, 1)))
    assert xla_layout(o) == (0, 1)


def entry(plan, name, names=""):
    """The C++ side's view of a plan: a validated _core.KernelEntry."""
    return _core.KernelEntry(module=b"", sha256="", function="f", kernel=name,
                             plan=plan, operand_names=names)


def test_plan_round_trips_through_the_cpp_parser():
    ops = [op("a", (7, 5), spec=TensorSpec(divisibility=(1, 5))),
           op("b", (5,), jnp.float16, TensorSpec(static=True), index=1),
           op("c", (7, 5), source=1, index=0)]
    plan = encode_plan(ops, num_args=2, num_rets=1)
    assert plan.dtype == np.int64 and plan[0] == PLAN_VERSION
    # a: ptr + 2 dims; b: ptr; c: ptr + 2 dims
    assert entry(plan.tolist(), "k", "a,b,c").num_slots == 7


def test_cpp_parser_rejects_bad_plans_naming_the_kernel():
    with pytest.raises(ValueError, match="kernel 'mykernel'.*version 9"):
        entry([9, 0, 0, 0, 0], "mykernel")
    good = encode_plan([op()], 1, 0).tolist()
    with pytest.raises(ValueError, match="trailing data"):
        entry(good + [0], "k")
    with pytest.raises(ValueError, match="truncated"):
        entry(good[:-1], "k")


def _key(launcher, ops=None, constexprs=(), options="", arch="sm_90a",
         versions=None):
    with mock.patch.object(_key_module, "versions",
                           lambda: versions or {"cutecall": "0", "dsl": "1"}):
        return _key_module.specialization_key(
            launcher=fingerprint(launcher, "launcher"),
            operands=ops if ops is not None else [op()], trees=["T", "U"],
            slots=(), scalar_types=(), keyword_scalars=(), symbols=(),
            constexprs=constexprs, compile_options=options, compile_key=None,
            arch=arch)


def launcher_a(stream, x, y):
    return x


def launcher_b(stream, x, y):
    return y


def test_key_is_content_not_identity_and_holds_only_extent_classes():
    k = _key(launcher_a)
    assert k == _key(launcher_a)
    assert k == _key(launcher_a, [op(shape=(1000, 12))])  # same classes
    assert k != _key(launcher_a, [op(shape=(1000, 3))])   # another class
    assert k != _key(launcher_b)                       # other source
    assert k != _key(launcher_a, [op(dtype=jnp.float16)])
    assert k != _key(launcher_a, [op(spec=TensorSpec(static=True))])
    assert k != _key(launcher_a, constexprs=(("alpha", 2.0),))
    assert _key(launcher_a, constexprs=(("alpha", 2.0),)) != \
        _key(launcher_a, constexprs=(("alpha", 2),))   # float vs int
    assert k != _key(launcher_a, options="--opt-level 2")
    assert k != _key(launcher_a, arch="sm_100a")
    assert k != _key(launcher_a, versions={"cutecall": "0", "dsl": "2"})


def test_static_extent_is_part_of_the_key():
    s = TensorSpec(static=True)
    assert _key(launcher_a, [op(shape=(4, 8), spec=s)]) != \
        _key(launcher_a, [op(shape=(4, 9), spec=s)])


def test_closure_values_are_part_of_the_key():
    def make(scale):
        def launcher(stream, x, y):
            return scale
        return launcher
    assert _key(make(1)) == _key(make(1))
    assert _key(make(1)) != _key(make(2))


def test_default_values_are_part_of_the_key():
    """Factory-made callables may capture values as parameter defaults (as
    FA4's hash of score/mask mods accounts for): another default value is
    another kernel, and a launcher without defaults keeps its old key."""
    def make(scale):
        def mod(score, b, h, scale=scale, *, shift=scale + 1):
            return score
        return mod

    def launcher(stream, x, y):
        return None
    assert fingerprint(make(1), "c") == fingerprint(make(1), "c")
    assert fingerprint(make(1), "c") != fingerprint(make(2), "c")
    assert not any(isinstance(p, list) and p[:1] == ["defaults"]
                   for p in fingerprint(launcher, "launcher"))


@pytest.mark.parametrize("value, match", [
    (np.ones(3), "is an array"),
    ([1, {2: 3}], None),
    ({"a": 1}, "not hashable"),
    (object(), "no stable repr"),
])
def test_constexpr_validation(value, match):
    if match is None:  # a list of hashables is fine, a dict inside is not
        with pytest.raises(TypeError, match="not hashable"):
            fingerprint(value, "constexpr 'c'")
        return
    with pytest.raises(TypeError, match=match) as e:
        fingerprint(value, "constexpr 'alpha'")
    assert "alpha" in str(e.value)


class KernelObject:
    """A kernel object like QuACK's Softmax(dtype, N): its attributes are
    compile-time content."""

    def __init__(self, n, tile=(128, 64), causal=False, config=None):
        self.n, self.tile, self.causal, self.config = n, tile, causal, config

    def __call__(self, stream, x, out):
        pass


class Mode(__import__("enum").Enum):
    FAST = 1
    SAFE = 2


def test_kernel_objects_are_keyed_by_their_attributes():
    assert _key(KernelObject(1024)) == _key(KernelObject(1024))
    assert _key(KernelObject(1024)) != _key(KernelObject(2048))
    assert _key(KernelObject(1024)) != _key(KernelObject(1024, causal=True))
    assert _key(KernelObject(1024)) != _key(KernelObject(1024, tile=(64, 64)))
    # Nested objects, enums and dicts inside an object's state count too.
    cfg = lambda **kw: KernelObject(1, config={"mode": Mode.FAST, **kw})  # noqa: E731
    assert _key(KernelObject(8, config=cfg())) == _key(KernelObject(8, config=cfg()))
    assert _key(KernelObject(8, config=cfg())) != \
        _key(KernelObject(8, config=cfg(mode=Mode.SAFE)))


def test_a_kernel_object_keeps_its_first_fingerprint_while_its_config_holds():
    k = KernelObject(64)
    first = launcher_fingerprint(k)
    k.cluster_n = 2              # what tracing leaves on QuACK's objects
    assert launcher_fingerprint(k) == first
    k.n = 128                    # a changed configuration is a new kernel
    assert launcher_fingerprint(k) != first


def test_a_front_takes_the_fingerprint_when_it_binds_the_launcher():
    import cutecall
    k = KernelObject(64)
    call = cutecall.cutlass_call(k, output_shape_dtype=lambda x: x)
    before = call.launcher.fingerprint
    k.cluster_n = 2  # what tracing QuACK's kernels does to the object
    assert call.launcher.fingerprint == before
    assert fingerprint(k, "launcher") != before


def test_unfingerprintable_state_names_the_attribute():
    k = KernelObject(8, config=object())
    with pytest.raises(TypeError, match=r"launcher.config = <object object at"):
        fingerprint(k, "launcher")
