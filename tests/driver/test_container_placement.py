"""A container argument (QuACK's ``EpilogueArguments``, a NamedTuple or a
plain tuple) is never placed in a parameter annotated ``cute.Tensor``, so an
output that sits between inputs is found without ``output_params``: QuACK's
``(mA, mB, mD, mC, epilogue_args, scheduler_args, varlen_args)`` called
``(a, b, c, epi, sched, None)`` puts the output at mD or mC, never at
``varlen_args`` with ``epi`` in mC; the kernel's writes then choose mD.
A parameter annotated as a NamedTuple of tensors (FA4's
``BlockSparseTensors``) still takes a plain tuple."""

from __future__ import annotations

from typing import NamedTuple, Optional

import pytest

cute = pytest.importorskip("cutlass.cute")

from cutecall._driver import signature  # noqa: E402
from cutecall._driver.outputs import candidates, placement  # noqa: E402


class Epilogue(NamedTuple):
    alpha: float = 1.0
    mAux: object = None


class BlockSparseTensors(NamedTuple):  # "Tensor" in its name: annotated
    mask_block_cnt: cute.Tensor
    mask_block_idx: cute.Tensor


def quack_like(mA: cute.Tensor, mB: cute.Tensor, mD: Optional[cute.Tensor],
               mC: Optional[cute.Tensor], epilogue_args, scheduler_args,
               varlen_args: Optional[Epilogue], mSFA: Optional[cute.Tensor] = None):
    """QuACK's GemmSm90.__call__ (abridged)."""


def fa4_like(mQ: cute.Tensor, mO: cute.Tensor,
             blocksparse_tensors: Optional[BlockSparseTensors] = None):
    """FA4's block-sparse forward (abridged)."""


class Array:
    shape, dtype = (4, 4), "float32"


def test_a_container_is_its_own_kind():
    assert candidates.arg_kind(Epilogue()) == candidates.CONTAINER
    assert candidates.arg_kind((Array(), Array())) == candidates.CONTAINER
    assert candidates.arg_kind(Array()) == candidates.ARRAY
    assert candidates.arg_kind(None) == candidates.NONE_ARG


def test_a_container_never_fills_a_tensor_parameter():
    sig = signature.analyze(quack_like)
    args = [Array(), Array(), Array(), Epilogue(), Epilogue(), None]
    kinds = [candidates.arg_kind(a) for a in args]
    open_params = list(range(len(sig.params)))
    names = [p.name for p in sig.params]
    found = placement.place_outputs(sig, open_params, kinds, 1, "inputs_first", args)
    assert [names[i] for i in found] in (["mD"], ["mC"])  # was varlen_args
    for _, outs in candidates.placements(sig, open_params, kinds, 1, "inputs_first"):
        rest = [i for i in open_params if i not in outs]
        assert names[rest[3]] == "epilogue_args"  # epi never in mC
    written = placement.place_written(sig, open_params, kinds, 1, "inputs_first",
                                      frozenset({"mD"}), args)
    assert [names[i] for i in written] == ["mD"]


def test_a_namedtuple_annotated_parameter_takes_a_plain_tuple():
    sig = signature.analyze(fa4_like)
    args = [Array(), (Array(), Array())]
    kinds = [candidates.arg_kind(a) for a in args]
    found = placement.place_outputs(sig, [0, 1, 2], kinds, 1, "inputs_first", args)
    assert [sig.params[i].name for i in found] == ["mO"]
