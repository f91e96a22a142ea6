"""The target is part of the call: its arch and the device properties a
kernel reads while traced (``cutlass.utils.HardwareInfo``, the driver's
attributes) come from the target's device or the table, never from the
compiling host, and they are part of the key. Runs on the CPU: the SM
counts are faked with ``CUTECALL_DEVICE``."""

import jax
import jax.numpy as jnp
import pytest

import cutecall
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.utils import HardwareInfo

from cutecall._driver import devices, hardware
from cutecall._driver.store import memory


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def lower(call, *args):
    return jax.jit(call).trace(*args).lower(lowering_platforms=("cuda",))


class PersistentCopy:
    """``c = a`` by a persistent grid of one CTA per SM, each striding over
    blocks: the grid is the SM count read while tracing, as FA4's static
    persistent scheduler reads it."""

    @cute.kernel
    def kernel(self, a: cute.Tensor, c: cute.Tensor, blocks: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        gdim, _, _ = cute.arch.grid_dim()
        for b in cutlass.range(bidx, blocks, gdim):
            i = b * 128 + tidx
            if i < a.shape[0]:
                c[i] = a[i]

    @cute.jit
    def __call__(self, stream: cuda.CUstream, a: cute.Tensor, c: cute.Tensor):
        sms = HardwareInfo().get_device_multiprocessor_count()  # a trace-time int
        blocks = cute.ceil_div(a.shape[0], 128)
        self.kernel(a, c, blocks).launch(grid=(sms, 1, 1), block=(128, 1, 1),
                                         stream=stream)


def copy_call():
    return cutecall.cutlass_call(PersistentCopy(), output_shape_dtype=lambda a: a)


def test_the_target_names_its_device_from_the_table(monkeypatch):
    monkeypatch.delenv("CUTECALL_DEVICE", raising=False)
    monkeypatch.delenv("CUTECALL_ARCH", raising=False)
    b200 = cutecall.current_target("sm_100a")
    assert (b200.arch, b200.device.name, b200.device.sm_count) == ("sm_100a", "b200", 148)
    assert b200.device.max_active_clusters(2) == 74
    assert cutecall.current_target("sm_100a", device="gb200").device.sm_count == 148
    assert cutecall.current_target("sm_80").device.name == "a100"
    assert cutecall.current_target("sm_120a").device.name == "rtx-5090"
    assert cutecall.current_target("sm_103a").device.name == "b300"
    for row in cutecall.DEVICES.values():
        assert row.source, row.name  # every number says where it came from
    monkeypatch.setenv("CUTECALL_DEVICE", "H100-PCIe")
    assert cutecall.current_target("sm_90a").device.sm_count == 114


def test_a_device_of_another_arch_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("CUTECALL_DEVICE", "b200")
    with pytest.raises(ValueError, match=r"CUTECALL_DEVICE='b200'.*sm_90a"):
        cutecall.current_target("sm_90a")
    monkeypatch.setenv("CUTECALL_DEVICE", "h300")
    with pytest.raises(ValueError, match=r"CUTECALL_DEVICE='h300' names no known GPU"):
        cutecall.current_target("sm_90a")


def test_a_driver_device_is_its_table_row_when_it_matches():
    h100 = devices.from_driver({"capability": (9, 0), "sm_count": 132,
                                "smem_per_block_optin": 232448, "smem_per_sm": 233472,
                                "l2_bytes": 52428800})
    assert h100.key() == devices.TABLE["h100-sxm"].key()
    h200 = devices.from_driver({"capability": (9, 0), "sm_count": 132,  # as measured
                                "smem_per_block_optin": 232448, "smem_per_sm": 233472,
                                "l2_bytes": 62914560})
    assert h200.name == "h200" and h200.max_active_clusters(4) == 30
    odd = devices.from_driver({"capability": (10, 0), "sm_count": 140,
                               "smem_per_block_optin": 232448, "smem_per_sm": 233472,
                               "l2_bytes": 1 << 27})
    assert odd.sm_count == 140 and odd.max_active_clusters(2) == 70
    assert odd.key() != devices.TABLE["b200"].key()


def test_two_sm_counts_give_two_keys_and_two_entries(compiles, monkeypatch):
    """A kernel that reads the SM count while tracing compiles once per SM
    count (no GPU here: the table answers), and remembers what it read."""
    monkeypatch.setenv("CUTECALL_ARCH", "sm_90a")
    keys = []
    for device, sms in (("h100-sxm", 132), ("h100-pcie", 114)):
        monkeypatch.setenv("CUTECALL_DEVICE", device)
        mark = memory.journal_mark()
        lower(copy_call(), sds((4096,)))
        (key, _name, arch, how), = memory.journal_since(mark)
        keys.append(key)
        assert (arch, how) == ("sm_90a", "compiled")
        assert dict(memory._entries[key].device_reads) == {"sm_count": sms}
    assert compiles() == 2 and keys[0] != keys[1]
    # The same device again: the same key, nothing compiled.
    monkeypatch.setenv("CUTECALL_DEVICE", "h100-sxm")
    lower(copy_call(), sds((8192,)))
    assert compiles() == 2


def test_a_kernel_compiled_for_132_sms_is_never_served_to_114(compiles, monkeypatch):
    """The store holds the H200's kernel; a process whose device has 114 SMs
    compiles its own instead of loading it (fresh in-process caches: only
    the store could serve it)."""
    monkeypatch.setenv("CUTECALL_ARCH", "sm_90a")
    monkeypatch.setenv("CUTECALL_DEVICE", "h200")
    lower(copy_call(), sds((4096,)))
    assert compiles() == 1
    cutecall.clear_cache()
    jax.clear_caches()
    lower(copy_call(), sds((8192,)))
    assert compiles() == 1  # the same SM count: the store's entry
    monkeypatch.setenv("CUTECALL_DEVICE", "h100-pcie")
    cutecall.clear_cache()
    jax.clear_caches()
    lower(copy_call(), sds((4096,)))
    assert compiles() == 2


def test_kernel_objects_built_for_a_target_read_its_device():
    """What a constructor reads of the GPU (HardwareInfo, the driver's
    attributes) answers with the target's device, with no GPU here."""
    target = cutecall.current_target("sm_100a", device="b200")
    with target.building():
        info = HardwareInfo()
        assert info.get_device_multiprocessor_count() == 148
        assert info.get_max_active_clusters(2) == 74
        attr = cuda.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        err, smem = cuda.cuDeviceGetAttribute(attr, 0)
        assert smem == 227 * 1024
        assert hardware.reads() == {"sm_count": 148, "max_active_clusters(2)": 74,
                                    "smem_per_block_optin": 227 * 1024}
    # Outside, the class and the driver are the DSL's own again.
    assert "get_device_multiprocessor_count" in HardwareInfo.__dict__
    assert cuda.cuDeviceGetAttribute is not None
    if cutecall._core.device_arch(0) is None:
        with pytest.raises(Exception):
            HardwareInfo().get_device_multiprocessor_count()  # no GPU: the real query


def test_torch_device_queries_answer_with_the_target_once_torch_is_imported():
    """cuDNN's and FlashInfer's host code asks torch for the capability and
    the opt-in shared memory when it builds a kernel object; inside
    ``building()`` torch answers with the target's device, recorded as
    read, and is itself again outside."""
    torch = pytest.importorskip("torch")
    before = {n: getattr(torch.cuda, n) for n in (
        "get_device_capability", "get_device_properties", "is_available", "current_device")}
    target = cutecall.current_target("sm_100a", device="b200")
    with target.building():
        assert torch.cuda.get_device_capability() == (10, 0)
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        assert (props.major, props.minor, props.multi_processor_count) == (10, 0, 148)
        assert props.shared_memory_per_block_optin == 227 * 1024
        assert torch.cuda.is_available()
        assert hardware.reads() == {"sm_count": 148, "smem_per_block_optin": 227 * 1024}
        if cutecall._core.device_arch(0) is None:
            with pytest.raises(AttributeError, match="total_memory.*'b200'"):
                props.total_memory  # noqa: B018 (no GPU here to ask)
    assert {n: getattr(torch.cuda, n) for n in before} == before


class NeedsVariable:
    """Traces only when an environment variable (outside every key) is set."""

    @cute.kernel
    def kernel(self, a: cute.Tensor, c: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        c[tidx] = a[tidx]

    @cute.jit
    def __call__(self, stream: cuda.CUstream, a: cute.Tensor, c: cute.Tensor):
        _needs_variable()
        self.kernel(a, c).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


def _needs_variable():
    import os
    if not os.environ.get("CUTECALL_TEST_FIXED"):
        raise RuntimeError("the environment is not fixed yet")


def test_a_failed_compile_is_retried_once_its_cause_is_fixed(compiles, monkeypatch):
    monkeypatch.delenv("CUTECALL_TEST_FIXED", raising=False)
    call = cutecall.cutlass_call(NeedsVariable(), output_shape_dtype=lambda a: a,
                                 output_params=("c",), static_fallback=False)
    with pytest.raises(cutecall.CompileError, match="not fixed yet"):
        lower(call, sds((32,)))
    n = compiles()
    with pytest.raises(cutecall.CompileError, match="not fixed yet"):
        lower(call, sds((32,)))
    assert compiles() == n  # the same world: remembered, not compiled again
    monkeypatch.setenv("CUTECALL_TEST_FIXED", "1")
    jax.clear_caches()
    assert lower(call, sds((32,))) is not None
    assert compiles() == n + 1
