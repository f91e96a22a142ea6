"""On a GPU: the target is the GPU's own, and what the device table says a
kernel reads of it (SM count, shared memory, L2, max active clusters) is
what the DSL's HardwareInfo reads from the driver; the numbers are printed
for the table's sources."""

import pytest

import cutecall
from cutecall import _core
from cutecall._driver import devices

pytestmark = pytest.mark.gpu


def test_the_gpu_is_its_own_target_and_the_table_matches_its_driver():
    props = _core.device_props(0)
    target = cutecall.current_target()
    assert target.device.sm_count == props["sm_count"]
    assert target.device.smem_per_block_optin == props["smem_per_block_optin"]
    assert devices.capability_of(target.arch) == tuple(props["capability"])
    from cutlass.utils.hardware_info import HardwareInfo
    import cuda.bindings.driver as cuda
    cuda.cuInit(0)
    err, dev = cuda.cuDeviceGet(0)
    err, ctx = cuda.cuDevicePrimaryCtxRetain(dev)
    cuda.cuCtxSetCurrent(ctx)
    info = HardwareInfo()
    measured = {n: info.get_max_active_clusters(n) for n in devices.CLUSTER_SIZES}
    print(f"{target.device.name}: driver {props}; max active clusters {measured}; "
          f"table {[target.device.max_active_clusters(n) for n in devices.CLUSTER_SIZES]}")
    assert measured[1] == target.device.max_active_clusters(1)
    assert measured[2] == target.device.max_active_clusters(2)
