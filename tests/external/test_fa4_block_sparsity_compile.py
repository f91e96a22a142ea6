"""FA4's block-sparsity kernel (``corpus.fa4_block_sparsity_corpus``)
compiles for sm_90a through both of cutecall's fronts from FA4's own
``BlockSparsityKernel`` object, called with FA4's arguments, on a machine
without a GPU.

What a user relies on: the first parameter is annotated
``BlockSparseTensors`` (a NamedTuple) and FA4 passes a plain tuple with
``None`` fields; the kernel has no stream parameter; it updates that
tuple's tensors in place. torch names no output (the kernel's writes say
which parameter it updates, and the custom op marks it mutated); JAX aliases
the four tensors to its outputs by field name. Another sequence length
compiles nothing (it is a runtime ``Int32``).
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flash_attn.cute.compute_block_sparsity")

import cutecall  # noqa: E402
from corpus import fa4_block_sparsity_corpus as bs  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

TEST = bs.SHAPES["test"]["block_sparsity"]
OPERANDS = ",".join(f"blocksparse_tensors.{f}" for f in bs.FIELDS)


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(("fa4_block_sparsity_corpus",),
                                        ("flash_attn", "cutlass", "torch", "jax")) == []


def test_torch_finds_the_tuple_it_writes(fresh_key_space):
    k, args = bs.case(*TEST).torch("meta", 0)
    before = _entries()
    k.compile(*args)
    assert k.output_params == ["blocksparse_tensors"]
    assert re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema)) == \
        ["blocksparse_tensors"]  # the custom op mutates exactly it
    k.compile(*bs.case(TEST[0], TEST[1], 2 * TEST[2]).torch("meta", 0)[1])
    assert _entries() - before == 1


def test_jax_updates_the_four_tensors_in_place(fresh_key_space):
    call, args = bs.case(*TEST).jax(True, 0)
    before = _entries()
    text = call.lower(*args).as_text()
    assert re.search(r'operands = "([^"]*)"', text).group(1) == OPERANDS
    assert _entries() - before == 1
