"""cutecall.attention's options on a GPU (one of three files; the others are
``test_gpu_flash_attention_ragged.py`` and ``test_gpu_flash_attention_decode.py``):
sliding windows at their edges, softcap, fp16, score and mask mods with aux
tensors and runtime scalars. Each case checks
outputs, LSE and the gradients against the float32 reference
(``attention_checks.check``)."""

import pytest

pytest.importorskip("flash_attn.cute")

import jax.numpy as jnp  # noqa: E402

from attention_checks import bf16, check, f16, f32, normal  # noqa: E402
from cutecall.attention import reference as R  # noqa: E402

pytestmark = pytest.mark.gpu


def test_window_edges_softcap_fp16_and_sq_ne_sk():
    q = normal(0, (2, 333, 4, 64), f16)
    k, v = normal(1, (2, 517, 2, 64), f16), normal(2, (2, 517, 2, 64), f16)
    for window in ((0, 0), (1, 0), (128, 127), (None, 64)):
        check(q, k, v, window_size=window, softcap=5.0)


def test_score_mod_with_aux_tensor_and_runtime_scalar():
    q, k, v = (normal(i, (2, 300, 4, 128), bf16) for i in range(3))
    slopes = jnp.asarray([2.0 ** (-8 * (h + 1) / 4) for h in range(4)], f32)
    for logit_scale in (0.8, 1.3):  # a runtime value: no recompile
        check(q, k, v, score_mod=R.alibi_score_mod(0.5), score_mod_bwd=R.alibi_score_mod_bwd(),
              aux_tensors=[slopes], aux_scalars=(logit_scale,),
              ref_kw=dict(score_mod=R.alibi_reference(0.5, slopes, logit_scale)))


def test_mask_mod():
    q, k, v = (normal(i, (1, 400, 2, 128), bf16) for i in range(3))
    check(q, k, v, mask_mod=R.prefix_lm_mask_mod(100),
          ref_kw=dict(mask_mod=R.prefix_lm_reference(100)))
