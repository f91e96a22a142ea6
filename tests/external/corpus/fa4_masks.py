"""FA4 ``mask_mod`` functions for the corpus, written as FA4's users write
them (CuTe DSL, ``(b, h, q_idx, kv_idx, seqlen_info, aux_tensors) ->
bool``). Imports the CuTe DSL: imported only when a case is called."""

import cutlass.cute as cute


@cute.jit
def causal_mask(b, h, q_idx, kv_idx, seqlen_info, aux_tensors):
    """True where query q_idx sees key kv_idx (q_idx >= kv_idx)."""
    return q_idx >= kv_idx
