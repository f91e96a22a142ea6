"""cutecall.quack on a Blackwell GPU (sm_100a / sm_103a; skipped on any
other): QuACK's sm100 GEMM through cutecall equals QuACK's own torch GEMM
pinned to the same tile and scheduler, bit for bit, for 2-CTA and 1-CTA
tiles, clusters 2x1, 1x2 and 2x2, the static and the CLC scheduler, with
M, N and K that are no multiple of any tile; cutecall compiles for the GPU's
arch and reads the GPU's SM count. (The MLP's GEMMs on sm100 are compared
with QuACK's, bit for bit, in test_gpu_quack_mlp.py.)"""

import numpy as np
import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall import _core  # noqa: E402
from cutecall.quack import gemm as quack_gemm  # noqa: E402
from cutecall.quack import mlp_kernels as qmk  # noqa: E402

ARCH = _core.device_arch(0)
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(ARCH not in ("sm_100a", "sm_103a"),
                                 reason=f"needs an sm_100/sm_103 GPU, found {ARCH}")]
Tile = quack_gemm.Tile
TILES = [Tile(256, 256, 2, 1, clc=True), Tile(256, 256, 2, 1), Tile(256, 128, 2, 2, clc=True),
         Tile(128, 256, 2, 1), Tile(128, 192, 1, 2, clc=True), Tile(128, 64, 1, 1)]
SHAPES = [(1000, 1504, 520), (4096, 4096, 1024)]   # (M, N, K)


def operands(m, n, k, dtype=jnp.bfloat16):
    ka, kb = jax.random.split(jax.random.key(m + n + k))
    return (jax.random.normal(ka, (m, k)).astype(dtype),
            jax.random.normal(kb, (n, k)).astype(dtype))


def bits(a) -> np.ndarray:
    """A 16-bit array's bits, from JAX or torch."""
    if isinstance(a, torch.Tensor):
        return a.contiguous().cpu().view(torch.int16).numpy()
    return np.asarray(a).view(np.int16)


def to_torch(a):
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[str(a.dtype)]
    return torch.from_numpy(bits(a).copy()).cuda().view(dtype)


def test_the_target_is_the_gpu_with_its_sm_count():
    target = cutecall.current_target()
    props = torch.cuda.get_device_properties(0)
    assert target.arch == ARCH
    assert target.device.sm_count == props.multi_processor_count


@pytest.mark.parametrize("tile", TILES, ids=str)
@pytest.mark.parametrize("mnk", SHAPES, ids=str)
def test_gemm_equals_quacks_torch_gemm_bit_for_bit(tile, mnk):
    a, b = operands(*mnk)
    d = jax.jit(lambda a, b: quack_gemm.matmul(a, b, tile))(a, b)
    theirs = qmk.authors_torch("fc2", tile)(to_torch(a), to_torch(b))  # a @ b.T
    torch.cuda.synchronize()
    np.testing.assert_array_equal(bits(d), bits(theirs))
    ref = a.astype(jnp.float32) @ b.astype(jnp.float32).T
    np.testing.assert_allclose(np.asarray(d, np.float32), np.asarray(ref),
                               atol=0.25, rtol=2e-2)


def test_the_kernel_ran_is_sm100_with_the_gpus_grid():
    a, b = operands(512, 512, 512)
    kernel = cutecall.compile(quack_gemm.call(Tile(256, 256, 2, 1), "bfloat16"), a, b).kernel
    assert kernel.arch == ARCH
    clusters = cutecall.current_target().device.max_active_clusters(2)
    assert dict(kernel.device_reads) == {"max_active_clusters(2)": clusters}
