# The typed stub of cutecall._core, written by nanobind.stubgen 3.1.0:
# do not edit. Regenerate: python tests/driver/test_core_stub.py

from collections.abc import Callable, Sequence
import enum
from typing import overload


TARGET: str = 'cutecall_call_v1'

TARGET_NO_GRAPH: str = 'cutecall_call_no_graph_v1'

STATE_TYPE: str = 'cutecall_call_state_v1'

PLAN_VERSION: int = 3

MAX_SLOTS: int = 256

MAX_RANK: int = 8

STATIC_STRIDE_SHIFT: int = 8

def handlers() -> dict:
    """Handler capsules per target, for jax.ffi.register_ffi_target."""

def state_type() -> dict:
    """The FFI state type registration, for jax.ffi.register_ffi_type."""

def sha256(data: bytes) -> str:
    """Hex SHA-256 of bytes (the C++ core's digest)."""

def set_runtime_path(path: str) -> None:
    """Path of libcute_dsl_runtime.so used on first load."""

def runtime_path() -> str: ...

def runtime_loaded() -> bool: ...

def device_arch(ordinal: int = 0) -> object:
    """
    The arch cutecall compiles for on CUDA device `ordinal` ("sm_90a" on an H100), read from the driver; None without a driver or device.
    """

def device_props(ordinal: int = 0) -> object:
    """
    What kernels read of CUDA device `ordinal` (SM count, shared memory per block opt-in and per SM, L2 bytes, compute capability), from the driver; None without a driver or device.
    """

def driver_cuda_version() -> object:
    """
    The CUDA version the driver supports (13000 for 13.0); None without a driver.
    """

def set_launch_blocking(on: bool) -> None:
    """Every launch synchronizes its stream (CUTECALL_LAUNCH_BLOCKING)."""

def launch_blocking() -> bool: ...

def registry_stats() -> dict: ...

def call_stats() -> dict:
    """
    How often the custom call's stages ran in this process, all call sites together.
    """

def reset_call_stats() -> None:
    """Sets every call_stats counter to 0."""

class LayoutProps:
    """
    What a launch object's specialization depends on in one tensor (tensor_signature.h): the unit-stride dim (-1: none), the pointer's alignment in bytes, whether an extent needs 64 bits, and the divisibility class of every extent and stride.
    """

    def __init__(self, *, unit_dim: int, align: int, wide: bool, extent_classes: Sequence[int], stride_classes: Sequence[int]) -> None: ...

    @property
    def unit_dim(self) -> int: ...

    @property
    def align(self) -> int: ...

    @property
    def wide(self) -> bool: ...

    @property
    def overlap(self) -> bool: ...

    @property
    def rank(self) -> int: ...

    @property
    def extent_classes(self) -> tuple: ...

    @property
    def stride_classes(self) -> tuple: ...

    def __repr__(self) -> str: ...

def layout_props(shape: Sequence[int], strides: Sequence[int], address: int, bits: int) -> LayoutProps:
    """The LayoutProps the launcher reads from a tensor."""

class UseKind(enum.IntEnum):
    """How a launch object's call argument reaches the kernel."""

    TENSOR = 0

    SCALAR = 1

    IGNORE = 2

    OUTPUT = 3

    CONST = 4

class ScalarType(enum.IntEnum):
    """Runtime scalar types, by ABI code."""

    Boolean = 0

    Int8 = 1

    Int16 = 2

    Int32 = 3

    Int64 = 4

    Uint8 = 5

    Uint16 = 6

    Uint32 = 7

    Uint64 = 8

    Float32 = 9

    Float64 = 10

SCALAR_TYPES: tuple = ...

class ArgUse:
    """
    How one leaf of a call fills the plan: kind, index (the operand or scalar slot), scalar_type (scalars) and value (compile-time values: a call matches only if equal).
    """

    @overload
    def __init__(self) -> None: ...

    @overload
    def __init__(self, kind: UseKind, index: int = 0, scalar_type: ScalarType = ScalarType.Boolean, value: object | None = None) -> None: ...

    @property
    def kind(self) -> UseKind: ...

    @property
    def index(self) -> int: ...

    @property
    def scalar_type(self) -> ScalarType: ...

    @property
    def value(self) -> object: ...

    def __repr__(self) -> str: ...

class KernelEntry:
    """
    A compiled kernel as C++ receives it from the compile driver; the plan is validated when it is built (ValueError naming the kernel). static_masks: per call leaf, the extents (bit d) and strides (bit STATIC_STRIDE_SHIFT + d) compiled in; a launcher matches the entry only for calls with those values.
    """

    def __init__(self, *, module: bytes, sha256: str, function: str, kernel: str, plan: Sequence[int], operand_names: str = '', symbol_names: str = '', uses: Sequence[ArgUse] = [], static_masks: Sequence[int] = []) -> None: ...

    @property
    def module(self) -> bytes: ...

    @property
    def sha256(self) -> str: ...

    @property
    def function(self) -> str: ...

    @property
    def kernel(self) -> str: ...

    @property
    def plan(self) -> list[int]: ...

    @property
    def operand_names(self) -> str: ...

    @property
    def symbol_names(self) -> str: ...

    @property
    def uses(self) -> list[ArgUse]: ...

    @property
    def static_masks(self) -> list[int]: ...

    @property
    def num_slots(self) -> int: ...

    @property
    def num_scalars(self) -> int: ...

    def with_uses(self, *, uses: Sequence[ArgUse], static_masks: Sequence[int] = []) -> KernelEntry:
        """
        This entry with a launch object's uses and static masks; the plan parsed when this entry was built is shared, not parsed again.
        """

    def __repr__(self) -> str: ...

def check_object(data: bytes, prefix: str) -> None:
    """Raises unless the object defines the CuTe DSL function `prefix`."""

class BundleEntry:
    """
    One verified bundle entry: its manifest fields (docs/bundles.md) and object bytes.
    """

    @property
    def name(self) -> str: ...

    @property
    def kernel(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def arch(self) -> str: ...

    @property
    def function(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    @property
    def plan(self) -> list[int]: ...

    @property
    def operand_names(self) -> str: ...

    @property
    def symbol_names(self) -> str: ...

    @property
    def num_slots(self) -> int: ...

    @property
    def scalar_types(self) -> list[str]: ...

    @property
    def scalar_names(self) -> list[str]: ...

    @property
    def layouts(self) -> list[list[int]]: ...

    @property
    def jax(self) -> str: ...

    @property
    def device_reads(self) -> list[tuple[str, int]]: ...

    @property
    def module(self) -> bytes: ...

class BundleContents:
    """A bundle read and verified by read_bundle."""

    @property
    def path(self) -> str: ...

    @property
    def digest(self) -> str: ...

    @property
    def cutecall_version(self) -> str: ...

    @property
    def dsl_version(self) -> str: ...

    @property
    def entries(self) -> list[BundleEntry]: ...

def read_bundle(path: str, expected_digest: str = '', device_arch: str = '', device_props: object | None = None) -> BundleContents:
    """
    Reads and verifies a bundle as the C++ Bundle::Open does, loading nothing; raises with the C++ message. `device_props` (as device_props returns them, or None) are compared with what each entry's kernel read of its device while traced.
    """

def arch_runs_on(arch: str, device_arch: str) -> bool:
    """Whether code compiled for `arch` runs on a GPU of `device_arch`."""

class TensorLauncher:
    """
    Launches one kernel's specializations with DLPack-exchange tensors (torch) on the tensors' current stream. Calls go straight to C++; on_miss(args, props) is called for new or unsupported arguments.
    """

    def __call__(self, /, *args, **kwargs):
        """Call self as a function."""

    def __init__(self, name: str, constexpr_positions: Sequence[bool], on_miss: Callable) -> None: ...

    def __len__(self) -> int: ...

    def time_launches(self, count: int, *args) -> float:
        """Seconds for `count` launches of `args` from one C++ loop."""

    def clear(self) -> None: ...

    def register_type(self, type: object, kind: str, fields: Sequence[str] = []) -> None:
        """
        How calls read objects of `type`: 'node' (a container: its `fields`, in order), 'scalar' (a CuTe DSL value: its .value) or 'const' (compiled in: by identity).
        """

    @property
    def name(self) -> str: ...

MAX_LAUNCHER_ARGS: int = 64

MAX_LAUNCHER_ENTRIES: int = 64

def set_eager_call(cls: object, attr: str, flags: object, flag: str) -> None:
    """
    Calls of instances of `cls` run `getattr(self, attr)(*args)` in C (straight into a TensorLauncher) while `flags.<flag>` is false and no keywords are passed, else cls's own Python __call__, which stays in the class for torch.compile to read.
    """
