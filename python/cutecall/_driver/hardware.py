"""The device a kernel sees while it is built and traced, answered from the
target (``target.Target``), never from the compiling host's GPU.

Persistent kernels read their GPU in host code while the DSL traces them:
FA4's tile schedulers and QuACK's GEMMs ask ``cutlass.utils.HardwareInfo``
for the SM count or the max active clusters and bake the answer into the
launch; other libraries read the driver's attributes
(``cuda.bindings.driver.cuDeviceGetAttribute``) when they build a kernel
object. Inside :func:`answering` both answer with the target's
``DeviceProps`` (no GPU needed, and none consulted), and every answer is
recorded (:func:`reads`): the compile keeps them with the kernel. The
properties themselves are in every key (``Target.key``).

``HardwareInfo``'s methods are replaced on the class (modules that imported
the class by name see it too) and ``cuDeviceGetAttribute`` on the
``cuda.bindings.driver`` module, for the duration, under a lock: process-wide
DSL state, as ``dsl.dsl_arch``. nvidia-cutlass-dsl 4.8.
"""

from __future__ import annotations

import contextlib
import threading

from .devices import DeviceProps

# CUdevice_attribute codes (cuda.h) a kernel may read, and the field that
# answers each.
_ATTRIBUTES = {16: "sm_count", 97: "smem_per_block_optin", 81: "smem_per_sm",
               38: "l2_bytes"}
_CAPABILITY = {75: 0, 76: 1}
_lock = threading.RLock()
_state = threading.local()


def reads() -> dict:
    """What kernels read of the device inside the innermost
    :func:`answering` of this thread: {"sm_count": 148,
    "max_active_clusters(2)": 74, ...}."""
    return dict(getattr(_state, "reads", None) or {})


def _record(what: str, value: int) -> int:
    log = getattr(_state, "reads", None)
    if log is not None:
        log[what] = int(value)
    return value


def _hardware_info_methods(device: DeviceProps) -> dict:
    def __init__(self, device_id: int = 0):
        self.device_id = device_id
        self.driver_version = 13000

    def get_max_active_clusters(self, cluster_size: int, stream=None) -> int:
        return _record(f"max_active_clusters({int(cluster_size)})",
                       device.max_active_clusters(cluster_size))

    def get_device_multiprocessor_count(self) -> int:
        return _record("sm_count", device.sm_count)

    def get_l2_cache_size_in_bytes(self) -> int:
        return _record("l2_bytes", device.l2_bytes)

    return {"__init__": __init__, "get_max_active_clusters": get_max_active_clusters,
            "get_device_multiprocessor_count": get_device_multiprocessor_count,
            "get_l2_cache_size_in_bytes": get_l2_cache_size_in_bytes}


def _attribute_reader(device: DeviceProps, original):
    from cuda.bindings import driver

    def cuDeviceGetAttribute(attribute, dev):  # noqa: N802 (the driver's name)
        code = int(attribute)
        ok = driver.CUresult.CUDA_SUCCESS
        if code in _ATTRIBUTES:
            field = _ATTRIBUTES[code]
            return ok, _record(field, getattr(device, field))
        if code in _CAPABILITY:
            return ok, device.capability[_CAPABILITY[code]]
        return original(attribute, dev)
    return cuDeviceGetAttribute


@contextlib.contextmanager
def answering(device: DeviceProps):
    """While inside: ``HardwareInfo`` and the driver's device attributes
    answer with `device`'s properties; :func:`reads` collects what was
    asked. Nests (the innermost device answers)."""
    from cuda.bindings import driver
    from cutlass.utils.hardware_info import HardwareInfo

    with _lock:
        saved = {name: HardwareInfo.__dict__[name]
                 for name in _hardware_info_methods(device)}
        saved_attribute = driver.cuDeviceGetAttribute
        outer_reads = getattr(_state, "reads", None)
        for name, method in _hardware_info_methods(device).items():
            setattr(HardwareInfo, name, method)
        driver.cuDeviceGetAttribute = _attribute_reader(device, saved_attribute)
        _state.reads = {}
        try:
            yield _state.reads
        finally:
            for name, method in saved.items():
                setattr(HardwareInfo, name, method)
            driver.cuDeviceGetAttribute = saved_attribute
            if outer_reads is not None:
                outer_reads.update(_state.reads)
            _state.reads = outer_reads


@contextlib.contextmanager
def building(target):
    """Kernel objects built inside see `target` (a ``target.Target``): the
    DSL's arch is its arch (``dsl.dsl_arch``) and the device answers with
    its properties (:func:`answering`)."""
    from .dsl import dsl_arch

    with dsl_arch(target.arch), answering(target.device):
        yield
