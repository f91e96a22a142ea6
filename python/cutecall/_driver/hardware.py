"""The device a kernel sees while it is built and traced, answered from the
target (``target.Target``), never from the compiling host's GPU.

Persistent kernels read their GPU in host code while the DSL traces them:
FA4's tile schedulers and QuACK's GEMMs ask ``cutlass.utils.HardwareInfo``
for the SM count or the max active clusters and bake the answer into the
launch; other libraries read the driver's attributes
(``cuda.bindings.driver.cuDeviceGetAttribute``) when they build a kernel
object, and cuDNN's and FlashInfer's host code asks torch
(``torch.cuda.get_device_capability``, ``get_device_properties``) when it
checks support or sizes a kernel object. Inside :func:`answering` all of
them answer with the target's ``DeviceProps`` (no GPU needed, and none
consulted), and every answer is recorded (:func:`reads`): the compile keeps
them with the kernel. The properties themselves are in every key
(``Target.key``).

``HardwareInfo``'s methods are replaced on the class (modules that imported
the class by name see it too), ``cuDeviceGetAttribute`` on the
``cuda.bindings.driver`` module and torch's queries on ``torch.cuda`` (only
when torch is already imported: cutecall never imports it), for the
duration, under a lock: process-wide state, as ``dsl.dsl_arch``.
nvidia-cutlass-dsl 4.8, torch 2.11.
"""

from __future__ import annotations

import contextlib
import sys
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


class _TorchDeviceProperties:
    """What ``torch.cuda.get_device_properties`` answers while building: the
    target's numbers (recorded as read); any other attribute from the host's
    own GPU, when it has one."""

    def __init__(self, device: DeviceProps, host_properties):
        self._device, self._host = device, host_properties
        self.name = device.name
        self.major, self.minor = device.capability

    multi_processor_count = property(lambda self: _record("sm_count", self._device.sm_count))
    l2_cache_size = property(lambda self: _record("l2_bytes", self._device.l2_bytes))
    shared_memory_per_block_optin = property(
        lambda self: _record("smem_per_block_optin", self._device.smem_per_block_optin))
    shared_memory_per_multiprocessor = property(
        lambda self: _record("smem_per_sm", self._device.smem_per_sm))

    def __getattr__(self, name: str):
        if self._host is None:
            raise AttributeError(
                f"cutecall: torch.cuda.get_device_properties().{name} of the target "
                f"device {self.name!r} is not known on a host without that GPU")
        return getattr(self._host, name)


def _torch_queries(device: DeviceProps) -> dict:
    """torch.cuda's functions answering with `device`, by name; {} when
    torch is not imported. With no GPU, torch also reports one."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    if cuda is None:
        return {}
    has_gpu = cuda.is_available()
    host = cuda.get_device_properties(cuda.current_device()) if has_gpu else None
    answers = _TorchDeviceProperties(device, host)
    queries = {"get_device_capability": lambda index=None: tuple(device.capability),
               "get_device_properties": lambda index=None: answers}
    if not has_gpu:
        queries.update(is_available=lambda: True, current_device=lambda: 0)
    return queries


@contextlib.contextmanager
def _patched(owner, replacements: dict):
    """`owner`'s attributes (a class's own, unwrapped) replaced while inside."""
    saved = {name: vars(owner)[name] if isinstance(owner, type) else getattr(owner, name)
             for name in replacements}
    for name, value in replacements.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(owner, name, value)


@contextlib.contextmanager
def answering(device: DeviceProps):
    """While inside: ``HardwareInfo``, the driver's device attributes and
    torch's device queries answer with `device`'s properties; :func:`reads` collects what was
    asked. Nests (the innermost device answers)."""
    from cuda.bindings import driver
    from cutlass.utils.hardware_info import HardwareInfo

    with _lock, contextlib.ExitStack() as patches:
        outer_reads = getattr(_state, "reads", None)
        patches.enter_context(_patched(HardwareInfo, _hardware_info_methods(device)))
        patches.enter_context(_patched(driver, {"cuDeviceGetAttribute": _attribute_reader(
            device, driver.cuDeviceGetAttribute)}))
        torch_queries = _torch_queries(device)
        if torch_queries:
            patches.enter_context(_patched(sys.modules["torch"].cuda, torch_queries))
        _state.reads = {}
        try:
            yield _state.reads
        finally:
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
