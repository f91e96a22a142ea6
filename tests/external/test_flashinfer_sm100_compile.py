"""FlashInfer's Blackwell norm + NVFP4 quantize kernels
(``corpus.flashinfer_sm100``: RMSNorm, and add + RMSNorm with an in-place
residual) compile for sm_100a through both of cutecall's fronts from
FlashInfer's own kernel objects on a machine without a GPU: one compile a
front, the outputs bound where FlashInfer passes them (named: the FP4
output is written only through inline PTX stores).

The kernel object picks its cluster size from the device's opt-in shared
memory when built: built for a device with less of it, the object -- and
so the kernel's key -- differs; the host plays no part."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")
pytest.importorskip("flashinfer.cute_dsl.rmsnorm_fp4quant")

import cutecall  # noqa: E402
import sm100_checks  # noqa: E402
from corpus import flashinfer_sm100 as flashinfer  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CASES = {c.name: c for c in flashinfer.cases()}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    with sm100_checks.session(tmp_path_factory) as compiled:
        yield compiled


def test_building_cases_imports_nothing_heavy():
    assert sm100_checks.heavy_imports_after_cases(
        "flashinfer_sm100", ("flashinfer", "cutlass", "torch", "jax")) == []


@pytest.mark.parametrize("name", list(CASES))
def test_compiles_once_per_front_for_sm100a(compiled, name):
    sm100_checks.check_fronts(compiled(CASES[name]), CASES[name])


def test_outputs_bind_where_flashinfer_passes_them(compiled):
    norm = compiled(flashinfer.case("rmsnorm_fp4quant"))
    assert norm.operands == ["mX,mW,mGlobalScale,mY,mS"]
    add = compiled(flashinfer.case("add_rmsnorm_fp4quant"))
    # r is in/out: the input bound to mR is the output it aliases
    assert add.operands == ["mX,mR,mW,mS_unswizzled,mYNorm,mGlobalScale,mY,mS"]


def test_the_cluster_size_follows_the_targets_shared_memory(compiled):
    """H = 32768 fits one CTA's 227 KiB on a B200; a device with 99 KiB
    per block needs a cluster of two: another object, another key."""
    b200 = cutecall.DEVICES["b200"]
    small = dataclasses.replace(b200, name="b200-99k", smem_per_block_optin=99 * 1024)
    objs = [flashinfer.captured("rmsnorm_fp4quant", 32768, d).kernel for d in (b200, small)]
    assert [o.cluster_n for o in objs] == [1, 2]
    keys = []
    for obj in objs:
        call = flashinfer.jax_call(obj, "rmsnorm_fp4quant")
        args = flashinfer._jax("rmsnorm_fp4quant")[1]
        x = sm100_checks.lower(call, args).as_text()
        keys.append(x.split('key = "')[1].split('"')[0])
    assert keys[0] != keys[1]
