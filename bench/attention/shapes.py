"""The shapes ``bench/attention/run.py`` times, and their work counts.
Plain Python (no JAX, no torch): ``run.py --dry-run`` prints the plan
from here without a GPU.

Three sets, each a list of :class:`Shape` (bf16 throughout):

- ``dense``: B = 16384 / S sequences of S tokens, H = 2048 / D heads (MHA),
  as FA's own benchmarks; forward and forward + backward.
- ``varlen``: ragged sequences packed into one 16k-token batch, lengths
  drawn (fixed seed) between S/4 and S, so most are not tile multiples;
  forward and forward + backward.
- ``decode``: S_q new tokens (1, or 8 as in speculative decoding) per
  sequence against a KV cache of S_k tokens, GQA (H query heads, Hkv KV
  heads), forward only, not causal (with S_q <= 8 against S_k >= 4k the
  mask changes nothing measurable; JAX's ``is_causal`` is top-left aligned,
  FA4's bottom-right, so leaving it off keeps every path on the same work).
"""

from __future__ import annotations

import dataclasses
import random

TOKENS, HIDDEN = 16384, 2048
SETS = ("dense", "varlen", "decode")


@dataclasses.dataclass(frozen=True)
class Shape:
    set: str                  # "dense", "varlen" or "decode"
    d: int                    # head dim (q, k and v)
    causal: bool
    batch: int                # sequences
    heads: int                # query heads
    heads_kv: int             # key/value heads
    seqlen: int               # dense: S; varlen: the S the lengths were drawn under; decode: S_k
    seqlen_q: int = 0         # decode only: new tokens per sequence
    lengths: tuple = ()       # varlen only: each sequence's length
    page_size: int = 0        # decode only: paged-KV page size (cutecall, FA4 torch)

    @property
    def modes(self) -> tuple:
        return ("fwd",) if self.set == "decode" else ("fwd", "fwd_bwd")

    @property
    def max_seqlen(self) -> int:
        return max(self.lengths) if self.lengths else self.seqlen

    def flops(self, mode: str) -> float:
        """4·H·Sq·Sk·D per sequence for the forward (half when causal),
        3.5 times that for forward + backward (the backward is 2.5 times
        the forward)."""
        if self.set == "decode":
            pairs = self.batch * self.seqlen_q * self.seqlen
        else:
            pairs = sum(n * n for n in self.lengths) if self.lengths \
                else self.batch * self.seqlen * self.seqlen
        fwd = 4 * self.heads * pairs * self.d * (0.5 if self.causal else 1.0)
        return fwd * (3.5 if mode == "fwd_bwd" else 1.0)

    def kv_bytes(self) -> int:
        """Bytes of K and V a decode step reads (bf16)."""
        return 2 * self.batch * self.seqlen * self.heads_kv * self.d * 2

    def label(self) -> str:
        mask = "causal" if self.causal else "full"
        if self.set == "decode":
            return (f"decode D{self.d} B{self.batch} Sq{self.seqlen_q} Sk{self.seqlen} "
                    f"H{self.heads}/{self.heads_kv} page{self.page_size}")
        if self.set == "varlen":
            return (f"varlen D{self.d} {mask:6s} S<={self.seqlen:<5d} {self.batch} seqs "
                    f"(max {self.max_seqlen})")
        return f"dense  D{self.d} {mask:6s} S{self.seqlen:<5d} B{self.batch} H{self.heads}"

    def record(self) -> dict:
        """The shape's fields as a JSON row starts them."""
        row = dict(set=self.set, d=self.d, causal=self.causal, seqlen=self.seqlen,
                   batch=self.batch, heads=self.heads, heads_kv=self.heads_kv)
        if self.set == "varlen":
            row.update(lengths=list(self.lengths), max_seqlen=self.max_seqlen,
                       tokens=sum(self.lengths))
        if self.set == "decode":
            row.update(seqlen_q=self.seqlen_q, page_size=self.page_size)
        return row


def varlen_lengths(s: int, seed: int) -> tuple:
    """Lengths drawn uniformly from [S/4, S] until the next would pass
    16384 tokens; the last takes the remainder when that is at least S/4."""
    rng = random.Random(f"{seed}-{s}")
    lengths, total = [], 0
    while True:
        n = rng.randint(max(1, s // 4), s)
        if total + n > TOKENS:
            rest = TOKENS - total
            if rest >= max(1, s // 4) or not lengths:
                lengths.append(rest)
            return tuple(lengths)
        lengths.append(n)
        total += n


def dense_shapes(dims, causals, seqlens) -> list:
    return [Shape("dense", d, c, TOKENS // s, HIDDEN // d, HIDDEN // d, s)
            for d in dims for c in causals for s in seqlens]


def varlen_shapes(dims, causals, seqlens, seed: int = 0) -> list:
    out = []
    for d in dims:
        for c in causals:
            for s in seqlens:
                lengths = varlen_lengths(s, seed)
                out.append(Shape("varlen", d, c, len(lengths), HIDDEN // d, HIDDEN // d, s,
                                 lengths=lengths))
    return out


def decode_shapes(d, heads, heads_kv, batches, seqlens_k, seqlens_q, page_size) -> list:
    for sk in seqlens_k:
        if sk % page_size:
            raise ValueError(f"decode S_k {sk} is not a multiple of the page size {page_size}")
    return [Shape("decode", d, False, b, heads, heads_kv, sk, seqlen_q=sq, page_size=page_size)
            for sq in seqlens_q for b in batches for sk in seqlens_k]


def parse_profile(spec: str) -> Shape:
    """``--profile`` SHAPE: tokens in any order, separated by ``-`` or
    ``,``: ``d64``/``d128``, ``s<N>``, ``b<N>`` (batch; default: 16k tokens
    per batch), ``causal``/``full``; the default is D128, S 2048, causal (the
    pass is given apart, ``--profile-mode``)."""
    d, s, b, causal = 128, 2048, None, True
    for tok in spec.replace(",", "-").lower().split("-"):
        if not tok:
            continue
        if tok in ("causal", "full"):
            causal = tok == "causal"
        elif tok[0] in "dsb" and tok[1:].isdigit():
            v = int(tok[1:])
            d, s, b = (v, s, b) if tok[0] == "d" else (d, v, b) if tok[0] == "s" else (d, s, v)
        else:
            raise ValueError(f"--profile: unknown token {tok!r} in {spec!r} "
                             "(use e.g. d128-s2048-causal or d128-s2048-b2-causal)")
    shape = dense_shapes([d], [causal], [s])[0]
    return shape if b is None else dataclasses.replace(shape, batch=b)
