"""cutecall.attention's head dims on a GPU: 96, 192 and 256, and 192 for Q/K
with 128 for V, each with GQA. A part of its own (``attention-head-dims``)
so that the attention parts end well inside one device call. Each case
checks outputs, LSE and the gradients against the float32 reference
(``attention_checks.check``)."""

import pytest

pytest.importorskip("flash_attn.cute")

from attention_checks import bf16, check, normal  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("d, dv, hkv", [(96, 96, 2), (192, 192, 4), (256, 256, 4),
                                        (192, 128, 4)])
def test_head_dims(d, dv, hkv):
    q = normal(0, (2, 300, 4, d), bf16)
    k, v = normal(1, (2, 300, hkv, d), bf16), normal(2, (2, 300, hkv, dv), bf16)
    check(q, k, v, causal=True)
