"""The PyTorch front on a GPU: every launcher feature against PyTorch
references, views and strides, runtime scalars, CUDA graph capture and
replay, torch.compile(fullgraph=True), side streams, a non-current device,
kernel failures as errors, and cutecall.autotune over torch launches.
Marked `gpu`."""

import pytest

torch = pytest.importorskip("torch")

import cutecall
import cutecall.torch as ct
from cutecall.examples import kernels
from cutecall.examples import torch_kernels as tk

pytestmark = pytest.mark.gpu

DEV = "cuda"


@pytest.fixture(autouse=True)
def _needs_torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def rand(*shape, device=DEV):
    return torch.randn(*shape, device=device)


# -- launch objects ---------------------------------------------------------

def test_axpby_contiguous_and_views(compiles):
    k = ct.kernel(tk.axpby_2d)
    for shape in [(4, 8), (64, 1000), (12, 4)]:  # one divisibility class
        x, y, out = rand(*shape), rand(*shape), torch.empty(shape, device=DEV)
        k(x, y, out, 2.5)
        torch.testing.assert_close(out, 2.5 * x + y)
    assert compiles() == 1 and len(k.launch) == 1
    # Views: a transpose (unit stride on dim 0), a column slice (4-byte
    # aligned pointer), a row-strided slice: each its own specialization.
    base = rand(300, 260)
    for view in [base.t(), base[:, 1:], base[::3, 2:200:1], base[1::2]]:
        y = rand(*view.shape)
        out = torch.empty(view.shape, device=DEV).t().contiguous().t()
        k(view, y, out, -1.0)
        torch.testing.assert_close(out, -1.0 * view + y)


def test_runtime_scalar_values_share_one_compile(compiles):
    k = ct.kernel(tk.axpby_2d)
    x, y, out = rand(8, 33), rand(8, 33), torch.empty(8, 33, device=DEV)
    for alpha in [0.0, 1.0, -3.5, 1e6, 7]:
        k(x, y, out, alpha)
        torch.testing.assert_close(out, alpha * x + y)
    # One compile (maybe an earlier test's); an int alpha is its own C++
    # entry (the call's signature differs) sharing that compile.
    assert compiles() <= 1 and len(k.launch) == 2


def test_scalar_default_applies_when_left_out():
    # signatures.scale_default(x, out, alpha: cutlass.Float32 = 0.5)
    from cutecall.examples import signatures
    k = ct.kernel(signatures.scale_default)
    x, out = rand(1000), torch.empty(1000, device=DEV)
    k(x, out)
    torch.testing.assert_close(out, 0.5 * x)
    k(x, out, 3.0)
    torch.testing.assert_close(out, 3.0 * x)


def test_allocate_mode_returns_outputs():
    k = ct.kernel(tk.axpby_2d, allocate=lambda x, y, alpha: torch.empty_like(x))
    x, y = rand(17, 129), rand(17, 129)
    torch.testing.assert_close(k(x, y, 0.5), 0.5 * x + y)


def test_strided_rank1_and_vectorized_example():
    add = ct.kernel(tk.add3)
    a = rand(10_001)
    b = rand(20_002)[::2]
    c = torch.empty(30_003, device=DEV)[::3]
    add(a, b, c)
    torch.testing.assert_close(c, a + b)
    vadd = ct.kernel(kernels.vector_add)
    a, b, c = rand(100_003), rand(100_003), torch.empty(100_003, device=DEV)
    vadd(a, b, c)
    torch.testing.assert_close(c, a + b)


def test_errors_before_launch_name_the_kernel():
    k = ct.kernel(tk.axpby_2d)
    x = rand(4, 8)
    with pytest.raises(ValueError, match="is on cpu"):
        k(x, x, torch.empty(4, 8), 1.0)
    y = rand(64)
    ct.default_cute_launcher(tk.helion_add_kernel, (1,), y, y, y, 64, 1.0)
    with pytest.raises(ValueError, match=r"helion_add_kernel': argument 6 \(Int64\) "
                                         r"= 1180591620717411303424 is out of range"):
        ct.default_cute_launcher(tk.helion_add_kernel, (1,), y, y, y, 1 << 70, 1.0)
    x2 = rand(4, 8)
    k(x2, x2, torch.empty_like(x2), 1.0)  # compiled: the next call is the fast path
    with pytest.raises(ValueError, match=r"= 1e\+40 is out of range for Float32"):
        k(x2, x2, torch.empty_like(x2), 1e40)  # read by the C++ launcher


def test_bad_tensors_on_the_fast_path_are_refused_by_name(compiles):
    k = ct.kernel(tk.axpby_2d)
    x = rand(4, 8)
    k(x, x, torch.empty_like(x), 1.0)  # compiled: later calls take the C++ path
    n = compiles()
    row = rand(1, 8).expand(4, 8)  # an expand()ed view: read is fine ...
    out = torch.empty_like(x)
    k(row, row, out, 2.0)
    torch.testing.assert_close(out, 2.0 * row + row)
    with pytest.raises(ValueError, match=r"output 'out' of 'axpby_2d' \(shape \(4, 8\), "
                                         r"strides \(0, 1\)\) has elements that several"):
        k(x, x, rand(1, 8).expand(4, 8), 1.0)  # ... writing is not
    window = torch.empty(11, device=DEV).as_strided((4, 8), (1, 1))
    with pytest.raises(ValueError, match="has elements that several indices reach"):
        k(x, x, window, 1.0)
    with pytest.raises(TypeError, match=r"has dtype torch.complex64, which has no CuTe DSL"):
        k(x, x, torch.empty(4, 8, dtype=torch.complex64, device=DEV), 1.0)
    assert compiles() == n


# -- Helion's launcher ------------------------------------------------------

def test_helion_add_kernel_grid_block_constexpr(compiles):
    for n in [1, 1001, 4097]:  # odd extents: one divisibility class
        x, y, out = rand(n), rand(n), torch.empty(n, device=DEV)
        grid = ((n + 255) // 256,)
        assert ct.default_cute_launcher(tk.helion_add_kernel, grid, x, y, out, n, 3.0) is None
        torch.testing.assert_close(out, x + 3.0 * y)
    assert compiles() == 1
    x, y, out = rand(50), rand(50), torch.empty(50, device=DEV)
    ct.default_cute_launcher(tk.helion_add_kernel, (1,), x, y, out, 50, -2.0,
                             block=(64, 1, 1))
    torch.testing.assert_close(out, x - 2.0 * y)
    assert compiles() == 2


def test_helion_2d_strided_and_cluster():
    x = rand(64, 300)
    out = torch.empty(64, 300, device=DEV)
    ct.default_cute_launcher(tk.helion_scale_rows_kernel, (2, 64), x, out, 1.5,
                             block=(256, 1, 1))
    torch.testing.assert_close(out, 1.5 * x)
    v = x.t()[:, 5:]  # strided view
    o = torch.empty(v.shape, device=DEV)
    ct.default_cute_launcher(tk.helion_scale_rows_kernel, ((v.shape[1] + 127) // 128, v.shape[0]),
                             v, o, -1.0, block=(128, 1, 1))
    torch.testing.assert_close(o, -v)
    x = rand(1024)
    out = torch.empty(1024, device=DEV)
    ct.default_cute_launcher(tk.helion_cluster_kernel, (8,), x, out, block=(128, 1, 1))
    torch.testing.assert_close(out, x + 2.0)


def test_helion_rejects_rank0_and_zero_grid():
    x = torch.ones((), device=DEV)
    with pytest.raises(ct.BackendUnsupported, match="tensor rank >= 1"):
        ct.default_cute_launcher(tk.helion_scale_rows_kernel, (1,), x, x, 1.0)
    assert ct.default_cute_launcher(tk.helion_add_kernel, (0, 1), x) is None


def test_failing_launch_is_an_error_with_kernel_name():
    x, out = rand(64), torch.empty(64, device=DEV)
    with pytest.raises(RuntimeError, match="helion_add_kernel.*(cuda|CUDA)"):
        ct.default_cute_launcher(tk.helion_add_kernel, (1,), x, x, out, 64, 1.0,
                                 block=(4096, 1, 1))
    torch.cuda.synchronize()  # the context is still usable
    ct.default_cute_launcher(tk.helion_add_kernel, (1,), x, x, out, 64, 1.0,
                             block=(64, 1, 1))
    torch.testing.assert_close(out, 2 * x)


# -- graphs, compiler, streams, devices ---------------------------------------

def test_cuda_graph_capture_replays_100_launches():
    add = ct.kernel(tk.add3)
    x0, y = rand(5000), rand(5000)
    x = x0.clone()
    add(x, y, x)  # warm up (compile, load) outside capture
    x.copy_(x0)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            for _ in range(100):
                add(x, y, x)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(x, x0)  # capture ran nothing
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(x, x0 + 100 * y, rtol=1e-4, atol=1e-4)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(x, x0 + 200 * y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_compile_fullgraph_two_kernels(backend):
    axpby = ct.kernel(tk.axpby_2d, allocate=lambda x, y, alpha: torch.empty_like(x))
    add = ct.kernel(tk.add3)

    def f(x, y):
        z = torch.relu(axpby(x, y, 2.0))
        flat = z.reshape(-1)
        out = torch.empty_like(flat)
        add(flat, flat, out)
        return out.reshape(x.shape) * 3 + y

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    x, y = rand(16, 40), rand(16, 40)
    want = torch.relu(2.0 * x + y) * 6 + y
    torch.testing.assert_close(compiled(x, y), want)
    torch.testing.assert_close(f(x, y), want)


def test_side_stream_orders_on_that_stream():
    add = ct.kernel(tk.add3)
    a, b = torch.zeros(1 << 16, device=DEV), rand(1 << 16)
    c = torch.empty_like(a)
    add(a, b, c)  # compile first
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # keeps s busy ~tens of ms
        a.fill_(5.0)
        add(a, b, c)  # must run after the fill, on s
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(c, 5.0 + b)


def test_tensors_on_a_non_current_device():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    add = ct.kernel(tk.add3)
    # Both contexts exist first: torch sets a device whose context does not
    # exist yet lazily, which would make current_device() below moot.
    torch.empty(1, device="cuda:0"), torch.empty(1, device="cuda:1")
    torch.cuda.set_device(0)
    for dev in ["cuda:1", "cuda:0", "cuda:1"]:
        a, b = rand(3000, device=dev), rand(3000, device=dev)
        c = torch.empty_like(a)
        with torch.cuda.device(0):
            add(a, b, c)
        torch.testing.assert_close(c, a + b)
    assert torch.cuda.current_device() == 0
    x = rand(100, device="cuda:1")
    out = torch.empty_like(x)
    with torch.cuda.device(0):
        ct.default_cute_launcher(tk.helion_add_kernel, (1,), x, x, out, 100, 1.0,
                                 block=(128, 1, 1))
    torch.testing.assert_close(out, 2 * x)


def test_dims_mismatch_at_launch_raises_naming_both_tensors(compiles):
    """Tied extents of one layout class: no new compile, so the C++
    launcher's check (before the launch) is what catches the mismatch."""
    k = ct.kernel(kernels.vector_add, dims={"a": ("n",), "b": ("n",), "c": ("n",)})
    a, out = torch.ones(1024, device=DEV), torch.empty(1024, device=DEV)
    k(a, a, out)
    torch.testing.assert_close(out, 2 * a)
    n = compiles()
    b = torch.ones(1008, device=DEV)      # 1008 = 16 * 63: the same class as 1024
    with pytest.raises(ValueError, match=r"operand 'b' dim 0 = 1008 must equal "
                                         r"operand 'a' dim 0 = 1024 \(tied dim 'n'\)"):
        k(a, b, out)
    assert compiles() == n
    torch.cuda.synchronize()              # nothing was launched: the stream is healthy


def test_autotune_picks_a_block_size_on_the_first_call_and_a_second_tuner_loads_it(
        tmp_path, monkeypatch):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path))

    def build(block):
        def add(x, y, out):
            n = x.numel()
            ct.default_cute_launcher(tk.helion_add_kernel, ((n + block - 1) // block,),
                                     x, y, out, n, 2.0, block=(block, 1, 1))
            return out
        return add

    configs = [dict(block=b) for b in (64, 128, 256, 512)]

    def tuner():
        return cutecall.autotune(build, configs=configs, name="helion_add_blocks",
                                 key=lambda x, y, out: (x.numel(), str(x.dtype)))
    n = 1 << 22
    x, y = rand(n), rand(n)
    first, out = tuner(), torch.full((n,), float("nan"), device=DEV)
    first(x, y, out)
    torch.testing.assert_close(out, x + 2.0 * y)
    r = first.report(x, y, out)
    assert r.source == "tuned" and r.errors == (None,) * len(configs)
    assert all(t > 0 for t in r.times_us)       # CUDA-event times of real launches
    assert len(configs) <= r.timing_runs <= 2 * len(configs)
    second, out2 = tuner(), torch.full((n,), float("nan"), device=DEV)
    second(x, y, out2)
    torch.testing.assert_close(out2, x + 2.0 * y)
    r2 = second.report(x, y, out2)
    assert (r2.source, r2.winner, r2.timing_runs) == ("store", r.winner, 0)
