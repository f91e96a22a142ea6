"""FlashAttention-4's Blackwell kernels (``corpus.fa4_sm100``: forward
causal 1-CTA and dense 2-CTA static persistent, backward 2-CTA d128 and
1-CTA d64, the arch-100 dQ postprocess, the split-KV combine), built by
FA4's own interface, compile for sm_100a through both of cutecall's fronts
on a machine without a GPU: one compile a front, one custom call, every
cubin for sm_100a with tcgen05 MMAs where the kernel runs MMAs.

The persistent forward reads the SM count while traced
(``HardwareInfo().get_device_multiprocessor_count()``): cutecall answers
from the target (the B200's 148), records it, and keys on it, so another
device's SM count is another kernel."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")
pytest.importorskip("flash_attn.cute.flash_fwd_sm100")

import cutecall  # noqa: E402
import sm100_checks  # noqa: E402
from corpus import fa4_sm100  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CASES = {c.name: c for c in fa4_sm100.cases()}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    with sm100_checks.session(tmp_path_factory) as compiled:
        yield compiled


def test_building_cases_imports_nothing_heavy():
    assert sm100_checks.heavy_imports_after_cases(
        "fa4_sm100", ("flash_attn", "cutlass", "torch", "jax")) == []


@pytest.mark.parametrize("name", list(CASES))
def test_compiles_once_per_front_for_sm100a(compiled, name):
    sm100_checks.check_fronts(compiled(CASES[name]), CASES[name])


def test_kernel_objects_are_the_ones_fa4_picks_on_a_b200():
    objs = {k: fa4_sm100.captured(k).kernel for k in
            ("fwd_causal", "fwd_dense_persistent", "bwd_2cta_d128", "bwd_1cta_d64")}
    causal, dense = objs["fwd_causal"], objs["fwd_dense_persistent"]
    assert (causal.use_2cta_instrs, causal.is_static_persistent) == (False, False)
    assert (dense.use_2cta_instrs, dense.is_static_persistent) == (True, True)
    assert objs["bwd_2cta_d128"].use_2cta_instrs and not objs["bwd_1cta_d64"].use_2cta_instrs
    post = fa4_sm100.captured("bwd_postprocess").kernel
    assert post.arch == 100 and post.accum_order.name == "TMEM_FRAG_2CTA"


def test_outputs_bind_where_fa4_passes_them(compiled):
    fwd = compiled(CASES[fa4_sm100.case("fwd_causal").name])
    assert fwd.operands == ["mQ,mK,mV,mO,mLSE"]
    bwd = compiled(CASES[fa4_sm100.case("bwd_2cta_d128").name])
    assert bwd.operands[0].split(",")[-3:] == ["mdQaccum", "mdK", "mdV"]


def test_persistent_forward_reads_the_targets_sm_count(compiled, monkeypatch):
    """The dense forward's grid is min(SMs, tiles): the SM count it read is
    the target's, kept with the kernel and part of its key."""
    from cutecall._driver import devices
    dense = fa4_sm100.case("fwd_dense_persistent")
    b200 = compiled(dense)
    assert dict(b200.jax_kernel.device_reads) == {"sm_count": 148}
    assert dict(b200.torch_kernel.device_reads) == {"sm_count": 148}
    assert dict(compiled(fa4_sm100.case("fwd_causal")).jax_kernel.device_reads) == {}

    # The same forward for a B200 named explicitly: the same key, no compile.
    monkeypatch.setenv("CUTECALL_DEVICE", "b200")
    fn, args = dense.jax()
    before = cutecall.compile_stats()["compiles"]
    assert sm100_checks.lower_journaled(fn, args) == []  # an in-memory hit
    assert cutecall.compile_stats()["compiles"] == before

    # A part with fewer SMs (a row like the B200's but 132 SMs): another key.
    fewer = dataclasses.replace(devices.TABLE["b200"], name="b200-132", sm_count=132)
    monkeypatch.setitem(devices.TABLE, "b200-132", fewer)
    monkeypatch.setenv("CUTECALL_DEVICE", "b200-132")
    fn, args = dense.jax()
    other = sm100_checks.lower_journaled(fn, args)
    assert [how for *_, how in other] == ["compiled"]
    assert other[0][0] != b200.jax_got[0][0]
    from cutecall._driver.store import memory
    assert dict(memory._entries[other[0][0]].device_reads) == {"sm_count": 132}
