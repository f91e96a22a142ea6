"""cutecall.attention on packed ragged sequences on a GPU (lengths not
multiples of any tile; causal and two-sided windows; GQA, MHA and MQA): a
part of its own beside ``test_gpu_flash_attention_options.py`` so that each
ends well inside one device call. Each case checks outputs, LSE and the
gradients against the float32 reference (``attention_checks.check``)."""

import pytest

pytest.importorskip("flash_attn.cute")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from attention_checks import bf16, check, normal  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("lengths, causal, window, hkv", [
    ([1, 129, 387], True, (64, None), 2),      # causal sliding window, GQA
    ([77, 300, 5], False, (32, 17), 4),        # two-sided window, MHA
    ([200, 1, 513], True, (None, None), 1),    # MQA
])
def test_packed_ragged_sequences(lengths, causal, window, hkv):
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    total = int(cu[-1])
    q = normal(0, (total, 4, 128), bf16)
    k, v = normal(1, (total, hkv, 128), bf16), normal(2, (total, hkv, 128), bf16)
    check(q, k, v, causal=causal, window_size=window, cu_seqlens_q=jnp.asarray(cu),
          cu_seqlens_k=jnp.asarray(cu), max_seqlen_q=max(lengths))
