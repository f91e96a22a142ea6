"""Runtime scalars in the torch front never recompile (issue 37 §1): QuACK's
GEMM with its epilogue and its symmetric GEMM, called as QuACK calls them --
``(A, B, D, C, EpilogueArguments(..., alpha=Float32(2.0), ...),
TileSchedulerOptions(max_active_clusters=Int32(...), ...), None)`` -- with
the authors' own scalar objects (``cutlass.Float32``, ``cutlass.Int32``),
compile once for every alpha. CPU, meta tensors: the compile, and the
``KernelEntry`` a launch registers (the scalars are SCALAR uses, read per
launch: the C++ table holds one entry). The GPU test launches."""

import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

import cutecall._core as core  # noqa: E402
from cutlass import Float32, Int32  # noqa: E402
from corpus import quack_gemm_corpus as corpus  # noqa: E402
from cutecall._driver import call_leaves  # noqa: E402

NAMES = ("gemm_add", "gemm_symmetric")
ARCH = "sm_90a"


def authors_args(name, alpha, device="meta"):
    """The torch call with QuACK's own scalar objects in its pytrees."""
    kernel, args = corpus.case(name, *corpus.SHAPES["test"][name]).torch(device, 0)
    epi = args[4]._replace(alpha=Float32(alpha))
    if getattr(epi, "beta", None) is not None:
        epi = epi._replace(beta=Float32(0.5))
    sched = args[5]._replace(max_active_clusters=Int32(66))
    return kernel, (*args[:4], epi, sched, *args[6:])


@pytest.mark.parametrize("name", NAMES)
def test_authors_scalar_objects_compile_once(name, compiles):
    keys = set()
    for alpha in (2.0, 3.0):
        kernel, args = authors_args(name, alpha)
        assert type(args[4].alpha) is Float32
        keys.add(kernel.compile(*args).key)
    assert len(keys) == 1 and compiles() == 1


@pytest.mark.parametrize("name", NAMES)
def test_a_launch_registers_one_entry_for_every_alpha(name, compiles, monkeypatch):
    """The miss path (bind, describe, specialize, the entry) on meta
    tensors: the same kernel, the scalars as runtime uses, and C++ told to
    read the authors' scalar types through ``.value``."""
    import cutecall.torch as ct
    monkeypatch.setattr(ct.Kernel, "check", lambda self, bound, launch: ARCH)
    entries = []
    for alpha in (2.0, 3.0):
        kernel, args = authors_args(name, alpha)
        props = [kernel.measure(t) for t in kernel.first_call.bind(args).arrays]
        entries.append(kernel.first_call.entry(args, props))
    first, second = entries
    assert first.sha256 == second.sha256 and compiles() == 1
    shape = [(int(u.kind), u.index, int(u.scalar_type)) for u in first.uses]
    assert shape == [(int(u.kind), u.index, int(u.scalar_type)) for u in second.uses]
    scalars = [u for u in first.uses if u.kind == core.UseKind.SCALAR]
    assert core.ScalarType.Float32 in [u.scalar_type for u in scalars]  # alpha
    consts = [u.value for u in first.uses if u.kind == core.UseKind.CONST]
    assert not any(isinstance(v, (Float32, Int32)) for v in consts)
    registered = {}

    class Recorder:
        def register_type(self, t, kind, fields=()):
            registered[t] = kind
    call_leaves.register_types(Recorder(), args, ct._describe.is_tensor)
    assert registered[Float32] == "scalar" and registered[Int32] == "scalar"
