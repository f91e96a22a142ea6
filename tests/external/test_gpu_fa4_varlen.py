"""FlashAttention-4's varlen scheduling helpers
(``corpus.fa4_varlen_corpus``) on a GPU: FA4's kernel objects through
cutecall's torch and JAX fronts (eager and in ``jax.jit``), with no output
names, against the block counts computed in Python and, bit for bit,
against FA4's own compiled helpers (``_compute_tile_cumsum``,
``_compute_blocks_to_batch``) on the same inputs. Torch outputs start at
-1, so an element a kernel misses shows."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flash_attn.cute.cu_blocks_kernel")

from authors_checks import check_against_authors  # noqa: E402
from corpus import fa4_varlen_corpus as varlen  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.mark.parametrize("size", ["test", "bench"])
@pytest.mark.parametrize("which", [0, 1], ids=list(varlen.KERNELS))
def test_varlen_helpers_match_fa4_bit_for_bit(which, size):
    check_against_authors(varlen.cases(size)[which], varlen.jax_args_from_torch)
