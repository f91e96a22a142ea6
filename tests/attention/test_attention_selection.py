"""cutecall.attention builds the kernel objects FlashAttention-4's own
interface builds for the same problem on the same target, attribute for
attribute (cutecall's content fingerprint): sm100 (Q stages, 2-CTA, the
schedulers, S ping-pong, split-KV and its combine, hd256's dedicated
backward, paged KV, varlen, windows, softcap, sinks), sm103, sm120, sm80
and sm90. FA4's side runs its torch host code on fake tensors with
``cute.compile`` intercepted (fa4_capture.py): nothing compiles, so these
tests take seconds."""

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall.attention import kernel_objects as ko  # noqa: E402
from cutecall.attention import reference as R  # noqa: E402
from cutecall.attention.checks import check  # noqa: E402
from fa4_capture import capture, differences  # noqa: E402

S = jax.ShapeDtypeStruct
bf16, i32, f32 = jnp.bfloat16, jnp.int32, jnp.float32

# Our options -> FA4's keyword names (arrays become fake tensors).
FA4_NAMES = {"window_size": None, "cu_seqlens_q": "cu_seqlens_q",
             "cu_seqlens_k": "cu_seqlens_k", "seqused_q": "seqused_q",
             "seqused_k": "seqused_k", "page_table": "page_table",
             "learnable_sink": "learnable_sink", "max_seqlen_q": "max_seqlen_q",
             "max_seqlen_k": "max_seqlen_k", "causal": "causal", "softcap": "softcap",
             "score_mod": "score_mod", "score_mod_bwd": "score_mod_bwd",
             "mask_mod": "mask_mod", "aux_tensors": "aux_tensors", "aux_scalars": "aux_scalars"}


def _fake(value: S, t):
    import torch
    return t(*value.shape, dtype=getattr(torch, str(value.dtype)))


def _fa4_kwargs(options: dict, t, backward: bool) -> dict:
    kw = {}
    for name, value in options.items():
        if name == "window_size":
            kw["window_size_left"], kw["window_size_right"] = value
        elif name in ("num_splits", "score_mod_bwd"):   # one side's only
            if backward == (name == "score_mod_bwd"):
                kw[name] = value
        elif isinstance(value, S):
            kw[FA4_NAMES[name]] = _fake(value, t)
        elif name == "aux_tensors":
            kw[name] = [_fake(x, t) for x in value]
        elif name == "aux_scalars":
            import cutlass
            kw[name] = tuple(cutlass.Float32(x) for x in value)
        else:
            kw[FA4_NAMES[name]] = value
    return kw


def fa4_objects(target, q, k, v, options: dict, grad: bool = True) -> tuple:
    """(forward objects, backward objects) FA4's interface compiles for the
    problem: [fwd] or [fwd, combine]; [preprocess, bwd, post dQ, (post dK,
    post dV)], each postprocess once per compile key (FA4's cache serves
    the others)."""
    import torch
    arch = int(target.arch.removeprefix("sm_").rstrip("a"))

    def fwd(t):
        from flash_attn.cute import interface
        interface._flash_attn_fwd(t(*q), t(*k), t(*v), return_lse=True, _arch=arch,
                                  **_fa4_kwargs(options, t, False))

    def bwd(t):
        from flash_attn.cute import interface
        packed = "cu_seqlens_q" in options
        lse = (q[-2], q[0]) if packed else (q[0], q[-2], q[1])
        o = q[:-1] + v[-1:]
        kw = _fa4_kwargs(options, t, True)
        interface._flash_attn_bwd(t(*q), t(*k), t(*v), t(*o), t(*o),
                                  t(*lse, dtype=torch.float32), softmax_scale=0.1, **kw)
    return capture(target, fwd), (capture(target, bwd) if grad else [])


def ours(target, q, k, v, options: dict, grad: bool = True) -> tuple:
    """cutecall.attention's objects for the same problem, in FA4's order."""
    given = dict(causal=False, window_size=(None, None), softcap=0.0, score_mod=None,
                 score_mod_bwd=None, mask_mod=None, cu_seqlens_q=None, cu_seqlens_k=None,
                 seqused_q=None, seqused_k=None, max_seqlen_q=None, max_seqlen_k=None,
                 page_table=None, learnable_sink=None, aux_tensors=None, aux_scalars=None,
                 scale=None)
    given.update(options)
    c = check(S(q, bf16), S(k, bf16), S(v, bf16), target=target, **given).config
    fwd = [ko.forward_kernel(c)] + ([ko.combine_kernel(c, q[-2])] if c.num_splits > 1 else [])
    if not grad:
        return fwd, [], c
    bwd = [ko.preprocess_kernel(c), ko.backward_kernel(c)]
    if not c.bwd_hd256:
        bwd.append(ko.postprocess_kernel(c, "dq"))
        if c.qhead_per_kvhead > 1:
            bwd.append(ko.postprocess_kernel(c, "dkv"))
            if c.dv != c.hdim:
                bwd.append(ko.postprocess_kernel(c, "dv"))
    # FA4 compiles a postprocess once where two have one compile key
    # (sm120: dQ's and dK's tiles are both 64x(4 warps)).
    unique = [x for i, x in enumerate(bwd) if not any(
        differences(x, y) == {} for y in bwd[:i])]
    return fwd, unique, c


def assert_same(target, q, k, v, options, grad=True):
    theirs = fa4_objects(target, q, k, v, options, grad)
    mine = ours(target, q, k, v, options, grad)
    for what, a, b in (("forward", mine[0], theirs[0]), ("backward", mine[1], theirs[1])):
        assert [type(x).__name__ for x in a] == [type(x).__name__ for x in b], what
        for x, y in zip(a, b):
            assert differences(x, y) == {}, (what, type(x).__name__)
    return mine[2]


CU, PAGES = S((4,), i32), S((3, 16), i32)
SM100 = [  # (q, k, v, options, what FA4 picks)
    ((2, 1000, 8, 128), (2, 1000, 2, 128), (2, 1000, 2, 128), {},
     dict(q_stage=2, two_cta=True, persistent=True)),
    ((2, 300, 4, 64), (2, 300, 4, 64), (2, 300, 4, 64), dict(causal=True),
     dict(q_stage=2, two_cta=False, persistent=False)),
    ((2, 64, 2, 128), (2, 4096, 2, 128), (2, 4096, 2, 128), dict(causal=True),
     dict(q_stage=1, s_ping_pong=True, persistent=True)),
    ((4, 1, 8, 128), (4, 8192, 2, 128), (4, 8192, 2, 128), dict(causal=True, num_splits=0),
     dict(q_stage=1, num_splits=18)),
    ((1, 512, 4, 256), (1, 512, 4, 256), (1, 512, 4, 256), dict(causal=True),
     dict(bwd_hd256=True, q_stage=1)),
    ((300, 8, 192), (300, 2, 192), (300, 2, 128),
     dict(cu_seqlens_q=CU, cu_seqlens_k=CU, causal=True, window_size=(64, None),
          softcap=20.0), dict(q_stage=2, bwd_2cta=True, bwd_cluster=2)),
    ((2, 777, 4, 96), (2, 900, 4, 96), (2, 900, 4, 96),
     dict(learnable_sink=S((4,), f32), seqused_k=S((2,), i32), window_size=(100, 20)),
     dict(local=True, bwd_2cta=False)),
    ((1, 1, 6, 256), (1, 4096, 2, 256), (1, 4096, 2, 256), {},   # hd256 decode, G=3
     dict(pack_gqa=False, two_cta=True, bwd_hd256=True)),
    ((2, 1, 8, 192), (2, 16384, 2, 192), (2, 16384, 2, 128), dict(num_splits=0),
     dict(tile=(128, 64), num_splits=37)),                   # (192, 128): 128x64 splits
    ((2, 200, 4, 64), (2, 5000, 4, 64), (2, 5000, 4, 64), dict(num_splits=4),
     dict(num_splits=4, two_cta=False, persistent=False)),
    ((1000, 4, 128), (1000, 4, 128), (1000, 4, 128),
     dict(cu_seqlens_q=CU, cu_seqlens_k=CU, max_seqlen_q=100),
     dict(q_stage=1, persistent=True)),                      # packed MHA, hint: one block
    ((2, 300, 4, 128), (2, 300, 4, 128), (2, 300, 4, 128), dict(seqused_q=S((2,), i32)),
     dict(q_stage=2, two_cta=False, persistent=False)),
    ((2, 300, 4, 128), (2, 300, 4, 128), (2, 300, 4, 128),    # flex: a score_mod, aux
     dict(score_mod=R.alibi_score_mod(0.5), score_mod_bwd=R.alibi_score_mod_bwd(),
          aux_tensors=[S((4,), f32)], aux_scalars=(0.8,)), dict(s_ping_pong=False)),
    ((1, 400, 2, 128), (1, 400, 2, 128), (1, 400, 2, 128),
     dict(mask_mod=R.prefix_lm_mask_mod(100)), dict(two_cta=True)),
]


@pytest.mark.parametrize("q, k, v, options, picked", SM100)
def test_sm100_objects_equal_fa4s(q, k, v, options, picked):
    c = assert_same(cutecall.current_target("sm_100a"), q, k, v, options)
    assert {name: getattr(c, name) for name in picked} == picked


@pytest.mark.parametrize("page_size", [128, 64])  # TMA pages (the tile's), cp.async
def test_sm100_paged_decode_equals_fa4s(page_size):
    pages = S((40, page_size, 2, 128), bf16)
    c = assert_same(cutecall.current_target("sm_100a"), (3, 4, 8, 128), pages.shape,
                    pages.shape, dict(page_table=PAGES, seqused_k=S((3,), i32)),
                    grad=False)
    assert c.paged_kv_tma == (page_size == 128) and not c.two_cta


def test_the_sm_count_is_the_target_devices():
    """FA4's split-KV heuristic reads the target device's SM count: a
    (made-up) B200 with 120 SMs splits 8 tiles 15 ways, as FA4 does when
    told 120 SMs; the Config records the count."""
    import dataclasses
    small = dataclasses.replace(cutecall.DEVICES["b200"], name="b200-120", sm_count=120)
    target = cutecall.current_target("sm_100a", device=small)
    q, kv = (4, 1, 8, 128), (4, 8192, 2, 128)
    c = assert_same(target, q, kv, kv, dict(causal=True, num_splits=0), grad=False)
    assert (c.sms, c.num_splits) == (120, 15)


def test_sm103_runs_the_sm100_classes():
    c = assert_same(cutecall.current_target("sm_103a"), (2, 1000, 8, 128),
                    (2, 1000, 2, 128), (2, 1000, 2, 128), dict(causal=True))
    assert c.family == "sm100" and ko.forward_kernel(c).is_sm103


@pytest.mark.parametrize("arch, grad", [("sm_120a", True), ("sm_80", False)])
def test_sm80_family_objects_equal_fa4s(arch, grad):
    c = assert_same(cutecall.current_target(arch), (2, 300, 8, 128), (2, 300, 2, 128),
                    (2, 300, 2, 128), dict(causal=True, softcap=10.0), grad=grad)
    assert c.tile == (128, 64)


def test_sm90_objects_equal_fa4s():
    assert_same(cutecall.current_target("sm_90a"), (2, 300, 8, 128), (2, 300, 2, 128),
                (2, 300, 2, 128), dict(causal=True, window_size=(64, None)))
