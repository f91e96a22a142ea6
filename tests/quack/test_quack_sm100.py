"""cutecall.quack per target arch, on CPU: for sm_100a (``CUTECALL_ARCH``)
the GEMM is QuACK's ``GemmDefaultSm100`` (2-CTA MMA, cluster launch control)
and lowers once per tile for every shape, its object is an sm_100a cubin of
tcgen05 instructions; the MLP's forward and gradients lower to QuACK's
sm100 GEMMs, captured with QuACK's device capacity (10, 0); the tile space
is QuACK's sm100 list; the persistent grid is the target device's (two SM
counts, two keys); sm90-only tiles and archs QuACK has no kernel for are
refused naming the arch."""

import collections
import dataclasses
import re

import pytest

pytest.importorskip("quack")
pytest.importorskip("cutlass")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall import quack  # noqa: E402
from cutecall.quack import gemm as quack_gemm  # noqa: E402
from cutecall.quack import mlp as quack_mlp  # noqa: E402
from cutecall.quack import mlp_kernels as qmk  # noqa: E402
from cutecall.quack import mlp_overlap  # noqa: E402
from cutecall.quack import tiles as qt  # noqa: E402
from corpus import authors  # noqa: E402
from device_code import cubins, cuobjdump, sass, sm_of  # noqa: E402

S = jax.ShapeDtypeStruct
BF16 = jnp.bfloat16
Tile = qt.Tile
TILE = Tile(256, 128, 2, 1, clc=True)          # 2-CTA MMA, CLC scheduler
TAG = "sm100_256x128_c2x1_2cta_clc_bfloat16"


def sm100():
    return cutecall.current_target("sm_100a")


@pytest.fixture
def on_sm100(monkeypatch):
    """Every call in the test targets sm_100a (a B200), as on a B200."""
    monkeypatch.setenv("CUTECALL_ARCH", "sm_100a")
    monkeypatch.delenv("CUTECALL_DEVICE", raising=False)


def lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def test_the_sm100_space_is_quacks_without_swap_ab_and_tma_gather():
    from quack.gemm_config import _default_config_for_cap, _get_sm100_configs
    theirs = [c for c in _get_sm100_configs() if not c.swap_ab and not c.use_tma_gather]
    assert {qmk.gemm_config(t, sm100()) for t in qt.SM100_TILES} == set(theirs)
    assert len(qt.SM100_TILES) == len(theirs) == 98
    assert qmk.gemm_config(qt.SM100_TILES[0], sm100()) == _default_config_for_cap(10)
    assert not any(t.pingpong or not t.persistent for t in qt.SM100_TILES)
    assert qt.tiles(sm100()) is qt.SM100_TILES
    assert qt.tiles(cutecall.current_target("sm_90a")) is qt.SM90_TILES
    assert qt.capacity(cutecall.current_target("sm_103a")) == (10, 3)
    assert TILE.two_cta and not Tile(256, 128, 1, 2).two_cta and Tile(128, 64, 2, 2).two_cta


def test_a_sm100_tile_lowers_once_for_every_shape_to_tcgen05_code(on_sm100, compiles):
    call = quack_gemm.call(Tile(256, 256, 2, 1, clc=True), "bfloat16")
    text = lowered(call, S((4096, 4096), BF16), S((8192, 4096), BF16))
    assert 'kernel = "quack_gemm_sm100_256x256_c2x1_2cta_clc_bfloat16"' in text
    lowered(call, S((1000, 2048), BF16), S((3072, 2048), BF16))
    kernel = cutecall.compile(call, S((24, 64), BF16), S((16, 64), BF16)).kernel
    assert compiles() == 1
    assert kernel.arch == "sm_100a"
    assert dict(kernel.device_reads) == {"max_active_clusters(2)": 74}  # B200: 148 SMs
    [image] = cubins(kernel.module)
    assert sm_of(image) == 100
    if cuobjdump() is not None:
        code = sass(image)
        assert "code for sm_100a" in code
        assert "UTCHMMA" in code and "HGMMA" not in code  # tcgen05 MMA, no wgmma


def test_the_persistent_grid_is_the_target_devices_two_sm_counts_two_keys(
        fresh_key_space, monkeypatch):
    tile, a, b = Tile(128, 192, 2, 1, pingpong=True), S((512, 256), BF16), S((512, 256), BF16)
    monkeypatch.delenv("CUTECALL_ARCH", raising=False)
    kernels = {}
    for device in ("h100-sxm", "h100-pcie"):              # 132 and 114 SMs
        monkeypatch.setenv("CUTECALL_DEVICE", device)
        jax.clear_caches()                                # as in a new process
        kernels[device] = cutecall.compile(quack_gemm.call(tile, "bfloat16",
                                                           cutecall.current_target("sm_90a")),
                                           a, b).kernel
    assert kernels["h100-sxm"].key != kernels["h100-pcie"].key
    assert [dict(k.device_reads) for k in kernels.values()] == [
        {"max_active_clusters(2)": 66}, {"max_active_clusters(2)": 57}]
    # The MLP's grid, a runtime scalar, is read from the target's device too.
    assert qmk.max_active_clusters(2, cutecall.current_target("sm_90a", "h100-pcie")) == 57
    monkeypatch.delenv("CUTECALL_DEVICE")
    assert qmk.max_active_clusters(2, sm100()) == 74
    assert quack._sm_count(4096, "sm_100a") == 148 * 2    # QuACK's Blackwell count


def test_mlp_forward_and_grad_lower_to_quacks_sm100_gemms(on_sm100, compiles):
    x, w1, w2 = S((4, 250, 512), BF16), S((1024, 512), BF16), S((512, 1024), BF16)

    def grads(**kw):
        def loss(x, w1, w2):
            return quack_mlp.mlp(x, w1, w2, "silu", tile=TILE, **kw).astype(jnp.float32).sum()
        text = lowered(jax.value_and_grad(loss, argnums=(0, 1, 2)), x, w1, w2)
        names = re.findall(r'kernel = "(quack_mlp_[a-z0-9_]+)"', text)
        assert len(names) == text.count("custom_call @cutecall_call_no_graph_v1")
        return collections.Counter(names)

    assert grads() == {f"quack_mlp_act_{TAG}_silu": 1, f"quack_mlp_fc2_{TAG}": 1,
                       f"quack_mlp_dact_{TAG}_silu": 1, f"quack_mlp_wgrad_{TAG}": 2,
                       f"quack_mlp_dgrad_{TAG}": 1}
    assert compiles() == 5
    # Gradient overlap on sm100 keeps the weight gradients' (persistent)
    # tile: QuACK's sm100 GEMM has no one-CTA-per-tile form. Blocks only.
    assert set(grads(grad_overlap=True, grad_chunks=2)) == set(grads())
    assert compiles() == 5
    assert not mlp_overlap.flat_weight_grads(True, sm100())
    assert mlp_overlap.flat_weight_grads(True, cutecall.current_target("sm_90a"))
    # The default tuning space is the target's.
    assert quack_mlp.tuner("act", "bfloat16", "silu").configs == [
        dataclasses.asdict(t) for t in qt.SM100_TILES]


@pytest.mark.parametrize("gemm", ["act", "dact", "wgrad"])
def test_sm100_gemms_are_quacks_sm100_objects_with_its_argument_structure(gemm):
    from quack.gemm_sm100 import GemmSm100
    captured = qmk.authors_args(gemm, TILE, "bfloat16", "silu", sm100())
    kernel = captured.kernel
    assert isinstance(kernel, GemmSm100) and type(kernel).__module__.startswith("quack.")
    assert kernel.use_2cta_instrs and kernel.use_clc_persistence
    m, k, n = S((1000, 512), BF16), S((1024, 512), BF16), S((1000, 1024), BF16)
    a_b_c = {"act": (m, k), "dact": (m, S((512, 1024), BF16), n), "wgrad": (m, n)}[gemm]
    ours = qmk.launch_args(gemm, TILE, "bfloat16", "silu", *a_b_c, target=sm100())
    assert authors.structure(ours) == authors.structure(captured.args[:len(qmk.PARAMS)])


def test_rmsnorm_forward_and_backward_lower_for_sm100(on_sm100, compiles):
    x, w = S((1000, 4096), BF16), S((4096,), jnp.float32)
    f = jax.grad(lambda x, w: quack.rmsnorm(x, w).astype(jnp.float32).sum(), argnums=(0, 1))
    assert re.findall(r'kernel = "(quack_rmsnorm[a-z0-9_]+)"', lowered(f, x, w)) == [
        "quack_rmsnorm_bfloat16_4096", "quack_rmsnorm_bwd_bfloat16_4096"]
    assert compiles() == 2


@pytest.mark.parametrize("arch, tile, match", [
    ("sm_100a", Tile(128, 192, 2, 1, pingpong=True), "QuACK has no pingpong GEMM on sm100"),
    ("sm_100a", Tile(128, 256, 2, 1, persistent=False), "sm100 GEMM is always persistent"),
    ("sm_90a", Tile(256, 256, 2, 1, clc=True), "dynamic scheduler on sm90 needs a tile-count"),
], ids=["pingpong", "non-persistent", "clc"])
def test_a_tile_the_targets_quack_gemm_lacks_is_refused_naming_the_arch(
        arch, tile, match, monkeypatch):
    monkeypatch.setenv("CUTECALL_ARCH", arch)
    full = f"not a configuration of QuACK's GEMM for target arch '{arch}': .*{match}"
    with pytest.raises(ValueError, match=f"cutecall.quack.gemm: tile .*{full}"):
        quack_gemm.matmul(S((64, 64), BF16), S((64, 64), BF16), tile)
    with pytest.raises(ValueError, match=f"cutecall.quack.mlp: tile .*{full}"):
        jax.eval_shape(lambda *a: quack_mlp.mlp(*a, tile=tile), S((64, 512), BF16),
                       S((1024, 512), BF16), S((512, 1024), BF16))
    with pytest.raises(ValueError, match=full):
        qmk.call("fc2", tile, "bfloat16")
    with pytest.raises(ValueError, match="clc=True needs persistent=True"):
        Tile(128, 128, 2, 1, persistent=False, clc=True)


@pytest.mark.parametrize("arch", ["sm_120a", "sm_80"])
def test_an_arch_quack_has_no_kernel_for_is_refused_naming_it(arch, monkeypatch):
    monkeypatch.setenv("CUTECALL_ARCH", arch)
    match = f"QuACK has no GEMM kernel cutecall runs for target arch '{arch}'"
    with pytest.raises(ValueError, match=match):
        quack_gemm.matmul(S((64, 64), BF16), S((64, 64), BF16))
    with pytest.raises(ValueError, match=match):
        jax.eval_shape(lambda *a: quack_mlp.mlp(*a), S((64, 512), BF16),
                       S((1024, 512), BF16), S((512, 1024), BF16))
    with pytest.raises(ValueError, match=match):
        quack_gemm.autotuned()
