"""The PyTorch front on CPU: argument and schema validation, Helion's errors,
specialization keys and plans, the custom op's schema and fake, and the C++
launcher's miss protocol. Launches themselves are in test_gpu_torch.py."""

import pytest

torch = pytest.importorskip("torch")

import cutecall
import cutecall._core as core
import cutecall.torch as ct
from cutecall._driver.plan import encode_plan
from cutecall.examples import kernels
from cutecall.examples import torch_kernels as tk
from cutecall._driver import dtypes
from cutecall._driver.store import memory as compile_cache
from cutecall.torch import _helion

ARCH = "sm_90a"


def props(*tensors):
    """C++'s props for tensors at 16-byte aligned addresses: (unit dim,
    alignment, 64-bit, extent classes, stride classes)."""
    return [core.layout_props(list(t.shape), list(t.stride()), 16,
                              8 * t.element_size())
            if isinstance(t, torch.Tensor) else None for t in tensors]


def like(t, unit, align, wide):
    """`t`'s props with the first three facts replaced."""
    p = props(t)[0]
    return core.LayoutProps(unit_dim=unit, align=align, wide=wide,
                            extent_classes=p.extent_classes,
                            stride_classes=p.stride_classes)


# -- Helion's default_cute_launcher: argument validation --------------------

@pytest.mark.parametrize("kwargs, error, text", [
    (dict(cute_compile_options=3), ValueError, "Invalid CuTe compile options: 3"),
    (dict(block=[256]), ValueError, "Invalid block specification: [256]"),
    (dict(block=()), ValueError, "Invalid block specification: ()"),
    (dict(num_warps=4), ct.BackendUnsupported,
     "Backend 'cute' does not support: launcher kwargs: ['num_warps']"),
])
def test_helion_rejects_bad_keywords(kwargs, error, text):
    x = torch.ones(4)
    with pytest.raises(error) as e:
        ct.default_cute_launcher(tk.helion_add_kernel, (1,), x, x, x, 4, 1.0, **kwargs)
    assert text in str(e.value)


@pytest.mark.parametrize("grid", [[1], (), 4])
def test_helion_rejects_bad_grid(grid):
    with pytest.raises(ValueError, match="Invalid grid specification"):
        ct.default_cute_launcher(tk.helion_add_kernel, grid)


@pytest.mark.parametrize("grid", [(0,), (4, 0), (1, 1, 0), (-1, 2)])
def test_helion_zero_grid_launches_nothing(grid, compiles):
    x = torch.ones(4)  # a CPU tensor: nothing is even looked at
    assert ct.default_cute_launcher(tk.helion_add_kernel, grid, x, x, x, 4, 1.0) is None
    assert compiles() == 0


def test_helion_rejects_cpu_tensors():
    x = torch.ones(4)
    with pytest.raises(ct.BackendUnsupported, match="launcher requires CUDA tensors"):
        ct.default_cute_launcher(tk.helion_add_kernel, (1,), x, x, x, 4, 1.0)


def test_helion_rejects_unsupported_scalars():
    with pytest.raises(ct.BackendUnsupported,
                       match="launcher scalar argument type: <class 'str'>"):
        ct.default_cute_launcher(tk.helion_add_kernel, (1,), "x")
    assert issubclass(ct.BackendUnsupported, RuntimeError)


def test_helion_constexpr_flags_and_cluster():
    assert _helion.constexpr_flags(tk.helion_add_kernel) == (False,) * 4 + (True,)
    launch = _helion._HelionLaunch(tk.helion_cluster_kernel, (128, 1, 1), None)
    assert launch.cluster == (2, 1, 1)
    assert launch.flags == (False, False)


def helion_spec(kernel, args, tensors_props=None, block=(128, 1, 1)):
    launch = _helion._HelionLaunch(kernel, block, None)
    full = (1, 1, 1) + tuple(args)
    p = [None] * 3 + (tensors_props or props(*args))
    return launch.spec_of(full, p, ARCH)


def test_helion_specialization_key_ignores_shapes_and_values():
    a, b = torch.ones(10), torch.ones(1002)  # extents of one class (2)
    s1, uses = helion_spec(tk.helion_add_kernel, (a, a, a, 10, 2.0))
    s2, _ = helion_spec(tk.helion_add_kernel, (b, b, b, 999, 2.0))
    assert s1.key == s2.key
    # grid: 3 Int32 scalars; tensors; n: runtime Int64; scale: baked in.
    assert [(u.kind, u.index, u.scalar_type) for u in uses] == [
        (1, 0, 3), (1, 1, 3), (1, 2, 3), (0, 0, 0), (0, 1, 0), (0, 2, 0),
        (1, 3, 4), (2, 0, 0)]
    assert s1.scalar_types == ("Int32",) * 3 + ("Int64",)


@pytest.mark.parametrize("change", [
    lambda a: (a.double(), a, a, 10, 2.0),          # dtype
    lambda a: (a, a, a, 10, 3.0),                   # constexpr value
    lambda a: (a, a, a, 10, -0.0),                  # signed zero
    lambda a: (a, a, a, 10, 2),                     # constexpr kind
    lambda a: (a, a, a, True, 2.0),                 # runtime scalar kind
])
def test_helion_specialization_key_changes(change):
    a = torch.ones(10)
    base, _ = helion_spec(tk.helion_add_kernel, (a, a, a, 10, 2.0))
    assert helion_spec(tk.helion_add_kernel, change(a))[0].key != base.key
    zero, _ = helion_spec(tk.helion_add_kernel, (a, a, a, 10, 0.0))
    assert zero.key != helion_spec(tk.helion_add_kernel, (a, a, a, 10, -0.0))[0].key


def test_helion_specialization_key_block_and_layout():
    a = torch.ones(10)
    base, _ = helion_spec(tk.helion_add_kernel, (a, a, a, 10, 2.0))
    assert helion_spec(tk.helion_add_kernel, (a, a, a, 10, 2.0),
                       block=(256, 1, 1))[0].key != base.key
    p = props(a, a, a, 10, 2.0)
    p[0] = like(a, 0, 4, False)  # a 4-byte aligned view
    assert helion_spec(tk.helion_add_kernel, (a, a, a, 10, 2.0), p)[0].key != base.key


# -- launch objects ---------------------------------------------------------

def test_kernel_construction_errors():
    with pytest.raises(TypeError, match="launcher must be callable"):
        ct.kernel(3)
    with pytest.raises(ValueError, match="outputs must be an int >= 0"):
        ct.kernel(tk.axpby_2d, outputs=-1)
    with pytest.raises(ValueError, match="fewer than outputs=4"):
        ct.kernel(tk.axpby_2d, outputs=4)
    with pytest.raises(TypeError, match="allocate must be a callable"):
        ct.kernel(tk.axpby_2d, allocate=3)
    with pytest.raises(TypeError, match="has no parameter 'beta'"):
        ct.kernel(tk.axpby_2d, beta=2.0)
    with pytest.raises(TypeError, match="compile_options must be a str"):
        ct.kernel(tk.axpby_2d, compile_options=["-O3"])


def test_kernel_call_errors_name_the_argument():
    k = ct.kernel(tk.axpby_2d)
    x = torch.ones(4, 8)
    with pytest.raises(ValueError, match="argument 'x' of 'axpby_2d' is on cpu"):
        k(x, x, x, 2.0)
    with pytest.raises(TypeError, match="argument 'alpha' of 'axpby_2d' is a runtime "
                                        r"scalar \(Float32\)"):
        k(x, x, x, x)
    with pytest.raises(TypeError, match="argument 'y' of 'axpby_2d' must be an "
                                        "array, a pytree of arrays, a scalar or None, got str"):
        k(x, "y", x, 2.0)
    with pytest.raises(ValueError, match="called without a tensor"):
        ct.kernel(tk.axpby_2d)(1.0)


def test_kernel_checks_device_before_dtype():
    k = ct.kernel(tk.add3)
    with pytest.raises(ValueError, match="argument 'a' of 'add3' is on cpu"):
        ct._describe.check_tensor(torch.ones(2, dtype=torch.complex64),
                                  f"argument 'a' of '{k.name}'", None)


def test_kernel_specialization_one_compile_for_all_shapes(compiles):
    k = ct.kernel(tk.axpby_2d)
    keys = set()
    for shape in [(4, 8), (12, 1000), (8, 4)]:  # one class: 4 f32
        x = torch.ones(shape)
        spec, uses = k.spec_of((x, x, x, 2.0), props(x, x, x, 2.0), ARCH)
        keys.add(spec.key)
        compile_cache.get_or_compile(spec, k.name, f"--gpu-arch {ARCH}", ARCH)
    assert len(keys) == 1 and compiles() <= 1
    assert [(u.kind, u.index, u.scalar_type) for u in uses] == \
        [(0, 0, 0), (0, 1, 0), (3, 2, 0), (1, 0, 9)]  # 3: output


def test_kernel_specialization_layouts():
    k = ct.kernel(tk.axpby_2d)
    x = torch.ones(4, 8)
    base, _ = k.spec_of((x, x, x, 2.0), props(x, x, x, 2.0), ARCH)
    # Strided operands: every stride a runtime value but the unit one.
    op = base.operands[0]
    assert op.strided and op.static_stride == (None, 1) and op.align == 16
    plan = encode_plan(base.operands, 3, 0, 1).tolist()
    assert core.KernelEntry(module=b"", sha256="", function="f", kernel="axpby_2d",
                            plan=plan).num_slots == 3 * 4 + 1
    transposed = [like(x, 0, 16, False)] + props(x, x)[0:2] + [None]
    t, _ = k.spec_of((x, x, x, 2.0), transposed, ARCH)
    assert t.key != base.key and t.operands[0].static_stride == (1, None)
    wide = [like(x, 1, 16, True)] + props(x, x, 2.0)[0:3]
    w, _ = k.spec_of((x, x, x, 2.0), wide, ARCH)
    assert w.key != base.key and w.operands[0].shape64
    none = [like(x, -1, 8, False)] + props(x, x, 2.0)[0:3]
    n, _ = k.spec_of((x, x, x, 2.0), none, ARCH)
    assert n.operands[0].static_stride == (None, None) and n.operands[0].align == 8


def test_kernel_custom_op_schema_and_fake():
    k = ct.kernel(tk.axpby_2d)
    schema = str(k._op._opoverload._schema)
    assert "(Tensor x, Tensor y, Tensor(a!) out, float alpha) -> ()" in schema
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(4, 8)
        assert k._op(x, x, torch.empty(4, 8), 2.0) is None

    alloc = ct.kernel(tk.axpby_2d, allocate=lambda x, y, alpha: torch.empty_like(x))
    schema = str(alloc._op._opoverload._schema)
    assert "(Tensor x, Tensor y, float alpha) -> Tensor" in schema
    with FakeTensorMode():
        x = torch.empty(5, 3)
        out = alloc._op(x, x, 2.0)
        assert out.shape == (5, 3)


def test_kernel_merge_places_outputs():
    k = ct.kernel(tk.axpby_2d, allocate=lambda x, y, alpha: torch.empty_like(x))
    x, y, o = object(), object(), object()
    assert k.first_call.merge((x, y, 2.0), (o,)) == [x, y, o, 2.0]
    with pytest.raises(TypeError, match="takes 3 arguments besides its outputs"):
        k.first_call.merge((x, y, 2.0, 3.0), (o,))


def test_kernel_is_collected():
    import gc
    import weakref
    k = ct.kernel(tk.add3)
    ref = weakref.ref(k)
    del k
    gc.collect()
    assert ref() is None


# -- the C++ launcher's miss protocol ----------------------------------------

def test_launcher_miss_sees_arguments_and_props():
    seen = []

    def miss(args, props):
        seen.append((args, props))
        raise LookupError("nope")

    launcher = core.TensorLauncher("k", [], miss)
    x = torch.ones(3)
    with pytest.raises(LookupError, match="nope"):
        launcher(x, 2, 1.5, True)
    assert seen[0][0][1:] == (2, 1.5, True)
    assert seen[0][1] == []  # a CPU tensor stops the fast path: no layouts
    assert len(launcher) == 0


def test_launcher_miss_returning_nothing_is_an_error():
    launcher = core.TensorLauncher("k", [], lambda args, props: None)
    with pytest.raises(RuntimeError, match="kernel 'k'"):
        launcher(torch.ones(3))


def test_dtype_table_matches_dsl_names():
    assert dtypes.lookup(torch.bool) == ("Uint8", 1)
    assert dtypes.lookup(torch.bfloat16) == ("BFloat16", 2)
    assert dtypes.lookup(torch.float8_e4m3fn) == ("Float8E4M3FN", 1)
    assert dtypes.lookup(torch.complex64) is None
    assert core.MAX_LAUNCHER_ARGS == 64


def test_vector_add_example_is_a_valid_launch_object():
    k = ct.kernel(kernels.vector_add)
    assert k.output_params == ["c"] and len(k.params) == 3


def test_scalar_default_compiles_as_its_annotated_type(compiles):
    # alpha: cutlass.Float32 = 0.5 reaches a `cute.Float` kernel parameter,
    # which refuses a Python float: left out, cutecall passes Float32(0.5).
    from cutecall.examples import signatures
    k = ct.kernel(signatures.scale_default)
    default = k.compile(*_descs(1000, 1000))
    passed = k.compile(*_descs(1000, 1000), 2.0)
    assert compiles() == 2 and default.key != passed.key
    k.compile(*_descs(1000, 1000), 3.0)
    assert compiles() == 2


# -- shape contracts: dims= ---------------------------------------------------

def _descs(*sizes):
    return [ct.TensorDesc((n,), torch.float32) for n in sizes]


def test_dims_tie_extents_into_one_runtime_value_checked_before_launch():
    k = ct.kernel(kernels.vector_add, dims={"a": ("n",), "b": ("n",), "c": ("n",)})
    compiled = k.compile(*_descs(1000, 1000, 1000))
    assert compiled.symbol_names == "n"   # one value; C++ checks every operand against it
    plain = ct.kernel(kernels.vector_add).compile(*_descs(1000, 1000, 1000))
    assert plain.symbol_names == "" and plain.key != compiled.key


def test_dims_mismatch_names_both_tensors_dims_and_values():
    k = ct.kernel(kernels.vector_add, dims={"a": ("n",), "b": ("n",)})
    with pytest.raises(ValueError, match=r"operand 'b' dim 0 = 10 must equal operand 'a' dim 0 = 1024 "
                                         r"\(tied dim 'n'\)"):
        k.compile(*_descs(1024, 10, 1024))


@pytest.mark.parametrize("dims, error, text", [
    ({"x": ("n",)}, ValueError, "dims names 'x', which is not a parameter"),
    ({"a": "n"}, TypeError, r"dims\['a'\] must be a tuple of names"),
    ([("n",)], TypeError, "dims must be a dict"),
])
def test_bad_dims_name_the_argument(dims, error, text):
    with pytest.raises(error, match=text):
        ct.kernel(kernels.vector_add, dims=dims)


def test_dims_of_the_wrong_rank_are_refused():
    k = ct.kernel(kernels.vector_add, dims={"a": ("m", "n")})
    with pytest.raises(ValueError, match=r"dims\['a'\] names 2 dims, but the tensor has rank 1"):
        k.compile(*_descs(8, 8, 8))


def test_an_arch_the_dsl_does_not_know_is_named_before_compiling(monkeypatch, compiles):
    monkeypatch.setenv("CUTECALL_ARCH", "sm_999")
    with pytest.raises(ValueError, match=r"target arch 'sm_999' \(from \$CUTECALL_ARCH\) is "
                                         r"not one the CuTe DSL compiles for; it knows .*sm_90a"):
        ct.kernel(kernels.vector_add).compile(*[ct.TensorDesc((8,), "float32")] * 3)
    assert compiles() == 0


def test_a_negative_extent_in_a_tensor_desc_is_refused():
    with pytest.raises(ValueError, match=r"TensorDesc shape \(64, -1\): dim 1 = -1 is negative"):
        ct.TensorDesc((64, -1), "float32")
