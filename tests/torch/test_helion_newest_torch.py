"""The newest installable Helion (1.5.1 when written) generates CuTe code on
a machine without a GPU, and cutecall's launcher compiles what that code
launches: the generated host function calls ``_default_cute_launcher(kernel,
grid, *args, block=...)`` (``helion.runtime.default_cute_launcher``, the name
``cutecall.torch.default_cute_launcher`` serves); here a launcher that
records the call stands in for it, and cutecall's Helion launch object
compiles the recorded launch for sm_90a. Skipped where Helion is not
installed (it needs no GPU to import: ``pip install --no-deps helion
filecheck psutil rich``)."""

import importlib.util

import pytest

torch = pytest.importorskip("torch")
helion = pytest.importorskip("helion")
hl = pytest.importorskip("helion.language")

import cutecall._core as core  # noqa: E402
from cutecall.torch import _helion  # noqa: E402

CONFIG = helion.Config(block_sizes=[128])


@helion.kernel(backend="cute", config=CONFIG, static_shapes=False)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(backend="cute", static_shapes=False)
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@helion.kernel(backend="cute", static_shapes=False)
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


def generated(tmp_path, *args, kernel=None, config=CONFIG):
    """Helion's generated module for `args` (CPU tensors: no GPU needed)."""
    code = (kernel or add).bind(args).to_triton_code(config)
    path = tmp_path / "helion_add_generated.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("helion_add_generated", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return code, module


def props(args):
    return [core.layout_props(list(a.shape), list(a.stride()), 16, 8 * a.element_size())
            if isinstance(a, torch.Tensor) else None for a in args]


def test_generated_code_calls_the_launcher_cutecall_serves(tmp_path):
    x = torch.randn(1000)
    code, _ = generated(tmp_path, x, x)
    assert "from helion.runtime import default_cute_launcher" in code
    assert "@cute.kernel" in code


def test_cutecalls_launcher_compiles_the_generated_launch(tmp_path, compiles):
    x, y = torch.randn(1000), torch.randn(1000)
    _, module = generated(tmp_path, x, y)
    launches = []
    module.add(x, y, _launcher=lambda *a, **kw: launches.append((a, kw)))
    ((kernel, grid, *args), kw), = launches
    assert kw == {"block": (128, 1, 1)} and grid == (8,)
    launch = _helion._HelionLaunch(kernel, kw["block"], None)
    full = tuple(grid) + (1,) * (3 - len(grid)) + tuple(args)
    compiled = launch.first_call.compile(full, [None] * 3 + props(args), "sm_90a")
    assert compiled.arch == "sm_90a" and compiled.module
    # Another length of the same divisibility classes: the same kernel.
    z = torch.randn(3000)
    module.add(z, z, _launcher=lambda *a, **kw: launches.append((a, kw)))
    (_, grid2, *args2), _ = launches[-1]
    launch.first_call.compile(tuple(grid2) + (1, 1) + tuple(args2),
                              [None] * 3 + props(args2), "sm_90a")
    assert compiles() == 1


def test_wrapper_plans_go_to_helions_own_launcher(monkeypatch):
    import helion.runtime.cute.launcher as helions
    calls = []
    monkeypatch.setattr(helions, "default_cute_launcher",
                        lambda *a, **kw: calls.append((a, kw)) or "helion's")

    def kernel():
        pass
    kernel._helion_cute_wrapper_plans = [{"kind": "tcgen05_d_tma"}]
    assert _helion.default_cute_launcher(kernel, (1,), 7, block=(128, 1, 1)) == "helion's"
    assert calls == [((kernel, (1,), 7), {"block": (128, 1, 1)})]


@pytest.mark.parametrize("kernel, args, config", [
    (softmax, lambda: (torch.randn(64, 256),), helion.Config(block_sizes=[1])),
    (matmul, lambda: (torch.randn(128, 64, dtype=torch.bfloat16),
                      torch.randn(64, 128, dtype=torch.bfloat16)),
     helion.Config(block_sizes=[64, 64, 32])),
], ids=["softmax", "matmul"])
def test_reductions_and_matmuls_compile_too(tmp_path, kernel, args, config):
    args = args()
    _, module = generated(tmp_path, *args, kernel=kernel, config=config)
    launches = []
    getattr(module, kernel.fn.__name__)(*args, _launcher=lambda *a, **kw: launches.append((a, kw)))
    ((cute_kernel, grid, *rest), kw), = launches
    assert not getattr(cute_kernel, "_helion_cute_wrapper_plans", None)
    launch = _helion._HelionLaunch(cute_kernel, kw.get("block", (256, 1, 1)), None)
    full = tuple(grid) + (1,) * (3 - len(grid)) + tuple(rest)
    assert launch.first_call.compile(full, [None] * 3 + props(rest), "sm_90a").module
