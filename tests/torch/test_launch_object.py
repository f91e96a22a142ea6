"""The driver's launch object (``cutecall._driver.launch_object``) under the
torch front, on CPU: one miss binds the call once and reads its leaves
once; the ``_core.KernelEntry`` it returns carries the static masks its
kernel compiled in (C++ keys the entry by them: no ``set_static``); the
fronts only bind and describe; Helion's launchers live in one bounded cache
of the module, not on Helion's kernel objects."""

import pathlib

import pytest

torch = pytest.importorskip("torch")

import cutecall
import cutecall._core as core
import cutecall.torch as ct
from cutecall._driver import launch_object, pipeline
from cutecall.examples import pytrees as pt
from cutecall.examples import specialization as sp
from cutecall.examples import torch_kernels as tk
from cutecall.torch import _helion, _kernel

ARCH = "sm_90a"


def props(*tensors):
    return [core.layout_props(list(t.shape), list(t.stride()), 16, 8 * t.element_size())
            if isinstance(t, torch.Tensor) else None for t in tensors]


def counting(monkeypatch, owner, name):
    calls = []
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, wrapper)
    return calls


@pytest.fixture
def meta_launches(monkeypatch):
    """Lets a launch's miss path run on meta tensors (no GPU here): the
    front's device check passes and names the test's arch."""
    monkeypatch.setattr(ct.Kernel, "check", lambda self, bound, launch: ARCH)


def test_a_miss_walks_the_arguments_twice(monkeypatch, compiles, meta_launches):
    k = ct.kernel(pt.scaled_add)
    x = torch.empty(64, device="meta")
    binds = counting(monkeypatch, pipeline.Launcher, "bind")
    leaves = counting(monkeypatch, launch_object, "call_leaves")
    types = counting(monkeypatch, _kernel, "register_types")
    parses, entry_type = [], core.KernelEntry

    class CountingEntry(entry_type):  # each build parses the plan
        def __init__(self, *args, **kwargs):
            parses.append(1)
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(core, "KernelEntry", CountingEntry)
    entry = k._on_miss((x, pt.Epilogue(bias=x, alpha=2.0), x), props(x, x, x))
    # The argument tree: bound once, its types registered once; the bound
    # tree read once; the plan parsed once (by the compile, whose entry the
    # launch object's shares).
    assert (len(binds), len(types), len(leaves), compiles()) == (1, 1, 1, 1)
    assert len(parses) == 1
    assert isinstance(entry, entry_type)
    # x, bias, alpha (scalar 0), relu (compiled in), out (written)
    assert [(int(u.kind), u.index) for u in entry.uses] == \
        [(0, 0), (0, 1), (1, 0), (4, 0), (3, 2)]
    assert entry.static_masks == []  # all dynamic: nothing to key by


def test_the_entry_carries_the_static_fallback_masks(compiles, meta_launches):
    k = ct.kernel(sp.row_sum_unrolled, name="row_sum_unrolled_entry")
    x, y = torch.empty(1000, 16, device="meta"), torch.empty(1000, device="meta")
    with pytest.warns(cutecall.StaticFallbackWarning):
        entry = k.first_call.entry((x, y), props(x, y))
    assert entry.static_masks == [0b10, 0]  # x's extent 1 compiled in
    assert k.static_masks == [0b10, 0]
    climbed = compiles()
    # Another row count starts at the rung: no climb, the same kernel.
    x2, y2 = torch.empty(1008, 16, device="meta"), torch.empty(1008, device="meta")
    again = k.first_call.entry((x2, y2), props(x2, y2))
    assert again.static_masks == [0b10, 0] and again.sha256 == entry.sha256
    assert compiles() == climbed


def test_a_launch_names_a_tensor_on_no_device():
    k = ct.kernel(sp.row_sum_unrolled)
    x, y = torch.empty(1000, 16, device="meta"), torch.empty(1000, device="meta")
    with pytest.raises(ValueError, match="argument 'x' of 'row_sum_unrolled' is on meta"):
        k.first_call.entry((x, y), props(x, y))


def test_kernel_entry_static_masks_are_per_leaf():
    plan = [core.PLAN_VERSION, 0, 0, 0, 0]  # no operands, scalars or symbols
    e = core.KernelEntry(module=b"", sha256="", function="f", kernel="k",
                         plan=plan, static_masks=[3, 0, 0x100])
    assert e.static_masks == [3, 0, 0x100]
    assert core.KernelEntry(module=b"", sha256="", function="f", kernel="k",
                            plan=plan).static_masks == []


def test_the_torch_front_never_sets_static_masks_in_cpp():
    assert not hasattr(core.TensorLauncher, "set_static")
    src = pathlib.Path(ct.__file__).parent
    for f in src.glob("*.py"):
        assert "set_static" not in f.read_text(), f.name


def test_kernel_options_are_keyword_only():
    with pytest.raises(TypeError):
        ct.Kernel(sp.row_sum_unrolled, 1)


def test_helion_launchers_live_in_one_bounded_module_cache():
    kernel = tk.helion_add_kernel
    first = _helion._launcher(kernel, (128, 1, 1), None)
    assert _helion._launcher(kernel, (128, 1, 1), None) is first
    assert _helion._launcher(kernel, (64, 1, 1), None) is not first
    assert not hasattr(kernel, "_cutecall_launchers")
    assert _helion._cached.cache_info().maxsize == _helion._CACHE_SIZE
    assert not hasattr(_helion, "_fallback")  # no id() map beside it


def test_helion_launch_is_a_describe_step():
    launch = _helion._HelionLaunch(tk.helion_add_kernel, (128, 1, 1), None)
    a = torch.ones(10)
    bound = launch.bind((1, 1, 1, a, a, a, 10, 2.0))
    assert bound.positions == (0, 1, 2, 3, 4, 5, 6)  # scale: a constexpr
    operands, written = launch.first_call.describe(bound, props(a, a, a), [0, 0, 0])
    assert [op.name for op in operands] == ["arg0", "arg1", "arg2"] and written == []
