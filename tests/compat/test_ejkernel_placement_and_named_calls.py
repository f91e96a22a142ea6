"""The behaviour of ejkernel's ``_cute_call.py`` module, on
``cutecall.ejkernel``: the module flag, output-leaf validation, placement
checks (single device, same device, ``device=``, sharded tracers under
shard_map), the multi-accelerator rule and its shard_map detection, and the
named call cache -- with the flaws fixed (the swallowed ``device`` check, the
shard_map probe of private state, the name-only cache key)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cutecall import ejkernel
from cutecall.compat import _ejkernel_cute_call
from cutecall.ejkernel import (CAN_USE_CUTE, build_cute_ffi_call,
                                       cute_call)

from shared import f32, lowered_text, run_on_cpu_devices

pytestmark = pytest.mark.usefixtures("single_accelerator")

if CAN_USE_CUTE:  # ejkernel's own test kernel (its callib test)
    import cuda.bindings.driver as cuda
    import cutlass.cute as cute

    @cute.kernel
    def _copy_kernel(inp: cute.Tensor, out: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        if tidx < inp.shape[0]:
            out[tidx] = inp[tidx]

    @cute.jit
    def _copy_launch(stream: cuda.CUstream, inp: cute.Tensor, out: cute.Tensor):
        _copy_kernel(inp, out).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


P = jax.sharding.PartitionSpec


def auto_mesh():
    return jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


def test_module_flag():
    assert CAN_USE_CUTE is True and ejkernel.CAN_USE_CUTE_PRIMITIVE is True


def test_rejects_unknown_keyword():  # ejkernel: rejects_legacy_jax_call_keyword
    with pytest.raises(TypeError, match="jax_call"):
        cute_call(jnp.ones((8,), dtype=jnp.float32), call=lambda x: x,
                  out_shape=f32(8), jax_call=lambda x: x)


def test_copy_kernel_lowers_under_jit():  # ejkernel: jit_uses_primitive_call
    call = build_cute_ffi_call(
        _copy_launch, output_shape_dtype=jax.ShapeDtypeStruct((8,), jnp.float16),
        compile_options="--enable-tvm-ffi")
    text = lowered_text(lambda x: cute_call(
        x, call=call, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype)),
        jax.ShapeDtypeStruct((8,), jnp.float16))
    assert "stablehlo.custom_call @cutecall_call_v1" in text


@pytest.mark.gpu
def test_gpu_copy_kernel_under_jit():
    call = build_cute_ffi_call(
        _copy_launch, output_shape_dtype=jax.ShapeDtypeStruct((8,), jnp.float16),
        compile_options="--enable-tvm-ffi")

    @jax.jit
    def run(x):
        return cute_call(x, call=call, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))

    x = jnp.arange(8, dtype=jnp.float16)
    np.testing.assert_array_equal(run(x), x)


# ---------------------------------------------------------------------------
# _validate_out_leaves / _shape_specs_from_out_leaves

@pytest.mark.parametrize("kwargs, err, match", [
    (dict(out=()), ValueError, "`out` must contain at least one output array"),
    (dict(out_shape=()), ValueError, "`out_shape` has no leaves"),
    (dict(out=[np.zeros(2, np.float32)]), TypeError,
     r"`out` leaves must be JAX arrays/tracers.*output index 0 \(out\[0\]\)"),
    (dict(out_shape=[(2,)]), TypeError, r"`out_shape` leaf \[0\]\[0\] must have"),
    (dict(out=(jnp.ones(2), jnp.ones(2)), out_shape=f32(2)), ValueError,
     "`out` has 2, `out_shape` has 1"),
    (dict(out=jnp.ones(3), out_shape=f32(2)), ValueError,
     r"shape mismatch at index 0.*`out` has shape \(3,\), expected \(2,\)"),
    (dict(out=jnp.ones(2, jnp.int32), out_shape=f32(2)), ValueError,
     "dtype mismatch at index 0.*`out` has dtype int32, expected float32"),
], ids=["empty-out", "empty-out_shape", "numpy-out", "bad-out_shape-leaf",
        "count", "shape", "dtype"])
def test_contract_errors(kwargs, err, match):
    with pytest.raises(err, match=match):
        cute_call(jnp.ones(2), call=lambda x: x, **kwargs)


@pytest.mark.parametrize("call, err, match", [
    (lambda x: (x, x[:1]), ValueError,
     r"shape mismatch at index 1 \(output\[1\]\): `call`'s result has shape "
     r"\(1,\), expected \(2,\)"),
    (lambda x: (x, x.astype(jnp.int32)), ValueError,
     r"dtype mismatch at index 1 \(output\[1\]\).*int32, expected float32"),
    (lambda x: (x,), ValueError, "`call`'s result has 1, `out_shape` has 2"),
    (lambda x: (x, 1.0), TypeError, r"non-array at output index 1 \(output\[1\]\)"),
], ids=["shape", "dtype", "count", "non-array"])
def test_result_must_match_the_contract(call, err, match):
    # Another tree with matching leaves is not an error: the leaves fill
    # the contract's tree (test_cute_call_out_tree.py).
    with pytest.raises(err, match=match):
        cute_call(jnp.ones(2), call=call, out_shape=(f32(2), f32(2)))


def test_lists_and_tuples_are_one_sequence_and_the_contract_tree_wins():
    got = cute_call(jnp.ones(2), call=lambda x: [x, x], out_shape=(f32(2), f32(2)))
    assert isinstance(got, tuple)
    got = cute_call(jnp.ones(2), call=lambda x: (x,), out=[jnp.zeros(2)])
    assert isinstance(got, list)


def test_out_alone_is_the_contract():
    with pytest.raises(ValueError, match="shape mismatch"):
        cute_call(jnp.ones(2), call=lambda x: x[:1], out=jnp.zeros(2))
    both = cute_call(jnp.ones(2), call=lambda x: {"k": x},
                     out={"k": jnp.zeros(2)}, out_shape=[f32(2)])
    assert list(both) == ["k"]  # out's tree, checked against out_shape


# ---------------------------------------------------------------------------
# Placement

def test_traced_arguments_have_no_device_to_check():
    jax.jit(lambda x: cute_call(x, call=lambda x: x, out_shape=f32(2),
                                device=0))(jnp.ones(2))


def test_placement_on_several_devices():
    results = run_on_cpu_devices("""
        import jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        from cutecall.compat import _ejkernel_cute_call
        from cutecall.ejkernel import cute_call
        d0, d1 = jax.devices()
        spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        body = lambda x: cute_call(x, call=lambda x: x * 2, out_shape=spec)
        def attempt(name, fn):
            try:
                fn()
                results[name] = "ok"
            except Exception as e:
                results[name] = [type(e).__name__, str(e)]
        auto = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
        x = jax.device_put(jnp.ones(8), NamedSharding(auto, P("x")))
        # ejkernel swallowed this AssertionError (raised inside `try: ...
        # except Exception: return`): the device check never fired.
        attempt("device_mismatch", lambda: cute_call(
            jax.device_put(jnp.ones(4), d0), call=lambda x: x, out_shape=spec,
            device=1))
        attempt("device_match", lambda: cute_call(
            jax.device_put(jnp.ones(4), d1), call=lambda x: x, out_shape=spec,
            device=1))
        _ejkernel_cute_call._accelerator_count = lambda: 2  # pretend these are GPUs
        smap = jax.shard_map(body, mesh=auto, in_specs=P("x"), out_specs=P("x"))
        attempt("shard_map_sharded", lambda: smap(x))
        attempt("jit_shard_map_sharded", lambda: jax.jit(smap)(x))
        attempt("pmap", lambda: jax.pmap(body)(jnp.ones((2, 4))))
        def legacy_mesh():
            with auto:  # deprecated `with mesh:`; ejkernel took it for shard_map
                return jax.jit(lambda x: body(x[:4]))(x)
        attempt("with_legacy_mesh", legacy_mesh)
        _ejkernel_cute_call._accelerator_count = lambda: 0
        explicit = jax.make_mesh((2,), ("x",),
                                 axis_types=(jax.sharding.AxisType.Explicit,))
        with jax.sharding.set_mesh(explicit):
            xe = jax.device_put(jnp.ones(8), P("x"))
            attempt("explicit_sharded_traced", lambda: jax.jit(
                lambda x: cute_call(x, call=lambda x: x * 2,
                                    out_shape=jax.ShapeDtypeStruct((8,), jnp.float32)))(xe))
    """)
    assert results["device_mismatch"][0] == "AssertionError", results
    assert results["device_match"] == "ok"
    assert results["shard_map_sharded"] == "ok"
    assert results["jit_shard_map_sharded"] == "ok"
    assert results["pmap"] == "ok"
    # A `with mesh:` block is not shard_map: XLA partitions that program.
    assert results["with_legacy_mesh"][0] == "AssertionError"
    assert "jax.shard_map" in results["with_legacy_mesh"][1]
    # A traced argument sharded explicitly over 2 devices, outside shard_map.
    assert results["explicit_sharded_traced"][0] == "AssertionError"
    assert "sharded across 2 devices" in results["explicit_sharded_traced"][1]


# ---------------------------------------------------------------------------
# _has_multi_accelerators / _in_shard_map_context

class FakeDevice:
    def __init__(self, platform):
        self.platform = platform


@pytest.mark.parametrize("devices, want", [
    ([FakeDevice("cpu")], 0), ([FakeDevice("cpu")] * 4, 0),
    ([FakeDevice("gpu")], 1), ([FakeDevice("gpu")] * 2, 2),
    (RuntimeError("no backend"), 0),
])
def test_accelerator_count(monkeypatch, devices, want):
    def fake():
        if isinstance(devices, Exception):
            raise devices
        return devices
    monkeypatch.setattr(jax, "devices", fake)
    count = getattr(_ejkernel_cute_call._accelerator_count, "__wrapped__", _ejkernel_cute_call._accelerator_count)
    assert count() == want


def _probe(x):
    seen.append(_ejkernel_cute_call._in_shard_map(jax.tree.leaves(x)))
    return x


seen: list = []


@pytest.mark.parametrize("context, want", [
    ("eager", False), ("jit", False), ("vmap_named", False),
    ("set_mesh_jit", False), ("shard_map", True), ("jit_shard_map", True),
    ("shard_map_jit", True), ("shard_map_vmap", True), ("pmap", True),
    ("shard_map_no_vma_check", True),
])
def test_shard_map_detection(context, want):
    mesh = auto_mesh()
    x = jnp.ones((1, 4))
    smap = functools.partial(jax.shard_map, mesh=mesh, in_specs=P("x"),
                             out_specs=P("x"))
    run = {
        "eager": lambda: _probe(x),
        "jit": lambda: jax.jit(_probe)(x),
        "vmap_named": lambda: jax.vmap(_probe, axis_name="b")(x),
        "set_mesh_jit": lambda: _with_mesh(mesh, lambda: jax.jit(_probe)(x)),
        "shard_map": lambda: smap(_probe)(x),
        "jit_shard_map": lambda: jax.jit(smap(_probe))(x),
        "shard_map_jit": lambda: smap(jax.jit(_probe))(x),
        "shard_map_vmap": lambda: smap(jax.vmap(_probe))(x),
        "pmap": lambda: jax.pmap(_probe)(x),
        "shard_map_no_vma_check": lambda: jax.shard_map(
            _probe, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
            check_vma=False)(x),
    }[context]
    seen.clear()
    run()
    assert seen and all(s == want for s in seen), seen


def _with_mesh(mesh, fn):
    with jax.sharding.set_mesh(mesh):
        return fn()


def test_ejkernel_probe_sees_nothing_under_shard_map():
    """Why the seed's detection fails on current JAX: its first probe (the
    legacy resource env) is empty under jax.shard_map, and its second reads
    core.thread_local_state, which no longer exists."""
    from jax._src import core, mesh as mesh_lib

    found = []

    def body(x):
        env = getattr(getattr(mesh_lib, "thread_resources", None), "env", None)
        found.append(getattr(getattr(env, "physical_mesh", None), "axis_names", ()))
        return x

    jax.shard_map(body, mesh=auto_mesh(), in_specs=P("x"), out_specs=P("x"))(
        jnp.ones((1, 4)))
    assert found == [()]
    assert not hasattr(core, "thread_local_state")


# ---------------------------------------------------------------------------
# The named call cache

def make_scaler(scale, log):
    def call(x):
        log.append(scale)
        return x * scale
    return call


def test_named_cache_reuses_an_equal_call():
    _ejkernel_cute_call._NAMED_CALLS.clear()
    log = []
    first, second = make_scaler(2.0, log), make_scaler(2.0, log)
    assert first is not second
    for fn in (first, second):
        cute_call(jnp.ones(3), call=fn, out_shape=f32(3), name="scaler")
    [(key, cached)] = _ejkernel_cute_call._NAMED_CALLS.entries.items()
    assert cached is first and key[0] == "scaler"


def test_named_cache_never_returns_another_kernel():
    """ejkernel keyed on (name, arg contract, out contract, device) only: a
    name that does not encode `scale` handed back the first callable."""
    _ejkernel_cute_call._NAMED_CALLS.clear()
    log = []
    a = cute_call(jnp.ones(3), call=make_scaler(2.0, log), out_shape=f32(3), name="s")
    b = cute_call(jnp.ones(3), call=make_scaler(3.0, log), out_shape=f32(3), name="s")
    np.testing.assert_array_equal(a, np.full(3, 2.0))
    np.testing.assert_array_equal(b, np.full(3, 3.0))
    assert log == [2.0, 3.0] and len(_ejkernel_cute_call._NAMED_CALLS.entries) == 2


def test_named_cache_keys_on_argument_contract_and_device():
    _ejkernel_cute_call._NAMED_CALLS.clear()
    call = make_scaler(2.0, [])
    cute_call(jnp.ones(3), call=call, out_shape=f32(3), name="n")
    cute_call(jnp.ones(4), call=call, out_shape=f32(4), name="n")
    cute_call(jnp.ones(3), call=call, out_shape=f32(3), name="n", device=0)
    cute_call(jnp.ones(3), call=call, out_shape=f32(3), name="n")
    assert len(_ejkernel_cute_call._NAMED_CALLS.entries) == 3
    cute_call(jnp.ones(3), call=call, out_shape=f32(3))  # no name: no cache
    assert len(_ejkernel_cute_call._NAMED_CALLS.entries) == 3


def test_named_cache_rechecks_rebound_closure_cells():
    _ejkernel_cute_call._NAMED_CALLS.clear()

    def make():
        scale = 2.0

        def call(x):
            return x * scale

        def rebind(v):
            nonlocal scale
            scale = v
        return call, rebind

    first, rebind = make()
    second, _ = make()
    cute_call(jnp.ones(2), call=first, out_shape=f32(2), name="r")
    rebind(5.0)  # the cached callable now computes x * 5
    got = cute_call(jnp.ones(2), call=second, out_shape=f32(2), name="r")
    np.testing.assert_array_equal(got, np.full(2, 2.0))
    assert list(_ejkernel_cute_call._NAMED_CALLS.entries.values()) == [second]


def test_named_cache_is_bounded(monkeypatch):
    cache = _ejkernel_cute_call._NamedCalls(4)
    monkeypatch.setattr(_ejkernel_cute_call, "_NAMED_CALLS", cache)
    for i in range(10):
        cute_call(jnp.ones(2), call=double_by, out_shape=f32(2), name=f"k{i}")
    assert [k[0] for k in cache.entries] == ["k6", "k7", "k8", "k9"]


def double_by(x):
    return x * 2


def _ident(x):
    return x


SHARED = [1, 2]  # mutable: keyed by identity


def make_kw(v):
    def call(x, *, k=v):
        return x * k
    return call


class Obj:
    def method(self, x):
        return x


@pytest.mark.parametrize("a, b, equal", [
    (0.0, -0.0, False), (1, True, False), (1, 1.0, False), (2.5, 2.5, True),
    ((1, (2, "a")), (1, (2, "a")), True), ((1, [2]), (1, [2]), False),
    (SHARED, SHARED, True), ({"a": 1}, {"a": 1}, False),
    (np.float32(1), np.float16(1), False), (jnp.float32, jnp.float32, True),
    (make_scaler(2.0, None), make_scaler(2.0, None), True),
    (make_scaler(2.0, None), make_scaler(-2.0, None), False),
    (lambda x: x * 2, lambda x: x * 3, False),
    (make_kw(1), make_kw(1), True), (make_kw(1), make_kw(2), False),
    (functools.partial(_ident, 1), functools.partial(_ident, 1), True),
    (functools.partial(_ident, 1), functools.partial(_ident, 2), False),
    (Obj().method, Obj().method, False),  # other self: by identity
    (object(), object(), False),
])
def test_content_key(a, b, equal):
    assert (_ejkernel_cute_call._content_key(a) == _ejkernel_cute_call._content_key(b)) is equal
    hash(_ejkernel_cute_call._content_key(a))


def test_content_key_of_built_calls():
    from cutecall.examples import ejkernel_style as ejs

    spec = f32(8)
    make = lambda scale, **kw: build_cute_ffi_call(
        ejs._build_scale_add_host_fns(scale)[1], output_shape_dtype=spec, **kw)
    a, b = make(2.0), make(2.0)
    assert a is not b and _ejkernel_cute_call._content_key(a) == _ejkernel_cute_call._content_key(b)
    assert _ejkernel_cute_call._content_key(make(3.0)) != _ejkernel_cute_call._content_key(a)
    assert _ejkernel_cute_call._content_key(make(2.0, compile_options="--gpu-arch sm_80")) != \
        _ejkernel_cute_call._content_key(a)
    # A closure that captures the built call (ejkernel's flash attention
    # pattern) is keyed through it.
    wrap = lambda c: (lambda x, y: c(x, y))
    assert _ejkernel_cute_call._content_key(wrap(a)) == _ejkernel_cute_call._content_key(wrap(b))
    assert _ejkernel_cute_call._content_key(wrap(a)) != _ejkernel_cute_call._content_key(wrap(make(3.0)))


def test_rebuilt_kernels_reuse_the_first_call_and_compile(compiles):
    """ejkernel kernels rebuild their host closures and build_cute_ffi_call
    on every call; with an equal content key the first call (and its trace
    cache) is reused and nothing recompiles (sizes of one divisibility
    class: multiples of 4 f32)."""
    from cutecall.examples import ejkernel_style as ejs

    fn = lambda x, y: ejs.scale_add(x, y, scale=2.0)
    lowered_text(fn, f32(64), f32(64))
    n = compiles()
    for size in (64, 1000, 4100):
        lowered_text(fn, f32(size), f32(size))
    assert compiles() == n
