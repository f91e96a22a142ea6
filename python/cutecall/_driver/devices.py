"""The GPUs cutecall compiles for, as kernels see them while they are
traced: SM count, shared memory, L2, and how many clusters of each size fit
at once (``cutlass.utils.HardwareInfo``'s answers). A persistent kernel bakes
these into its launch code, so they are part of every key (``target``).

With a GPU, a device's properties come from its driver
(``_core.device_props``) and are matched to a row of :data:`TABLE` by
compute capability, SM count and L2 (the row's numbers are then the
device's: one key for a CPU-built entry and the GPU that runs it). Without one, the
row named by ``$CUTECALL_DEVICE`` or the arch's default row answers.

Sources, per row (``DeviceProps.source``):

* SM counts: NVIDIA's datasheets and architecture whitepapers, named per row.
* Shared memory per block (opt-in): the CUDA C++ Programming Guide's
  per-capability table, the same numbers the CuTe DSL keeps
  (``cutlass.cutlass_dsl.SMEM_CAPACITY_MAP``: 227 KiB on sm_90/100/103, 163
  KiB on sm_80, 99 KiB on sm_86/89/120/121); per SM 1 KiB more.
* Max active clusters: measured where a row says so (an H200: 132, 66, 30,
  15, 7 for sizes 1 to 16), else ``sm_count // size`` (clusters need their
  SMs in one GPC, so a real device may fit fewer).
No framework, no CuTe DSL.
"""

from __future__ import annotations

import dataclasses
import os

DEVICE_ENV = "CUTECALL_DEVICE"
CLUSTER_SIZES = (1, 2, 4, 8, 16)
KIB, MIB = 1024, 1024 * 1024


@dataclasses.dataclass(frozen=True)
class DeviceProps:
    """What a kernel may read of its GPU while traced. ``clusters``: max
    active clusters per size in :data:`CLUSTER_SIZES` (empty: derived as
    ``sm_count // size``)."""

    name: str
    capability: tuple
    sm_count: int
    smem_per_block_optin: int
    smem_per_sm: int
    l2_bytes: int
    clusters: tuple = ()
    source: str = ""

    def max_active_clusters(self, size: int) -> int:
        """How many clusters of `size` CTAs (one CTA per SM) run at once."""
        size = int(size)
        if size < 1 or size > 32:
            raise ValueError(f"cutecall: cluster size must be 1..32, got {size}")
        if self.clusters and size in CLUSTER_SIZES:
            return self.clusters[CLUSTER_SIZES.index(size)]
        return self.sm_count // size

    def key(self) -> dict:
        """The part of a specialization key the device gives (its name and
        source are not: equal properties are one key)."""
        return {"sms": self.sm_count, "smem": self.smem_per_block_optin,
                "smem_sm": self.smem_per_sm, "l2": self.l2_bytes,
                "clusters": [self.max_active_clusters(n) for n in CLUSTER_SIZES]}


def _row(name, capability, sms, smem_kib, l2_mib, source, clusters=()):
    return DeviceProps(name, capability, sms, smem_kib * KIB, (smem_kib + 1) * KIB,
                       int(l2_mib * MIB), tuple(clusters), source)


_HOPPER = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"
# cuOccupancyMaxActiveClusters (HardwareInfo.get_max_active_clusters) on an
# H200 for cluster sizes 1, 2, 4, 8, 16: clusters stay inside a GPC.
_GH100_CLUSTERS = (132, 66, 30, 15, 7)
_BLACKWELL = "NVIDIA Blackwell Architecture Technical Brief (2024)"
TABLE: dict[str, DeviceProps] = {row.name: row for row in (
    _row("h100-sxm", (9, 0), 132, 227, 50, _HOPPER + ": H100 SXM5, 132 SMs, 50 MB L2; "
         "max active clusters as measured on an H200 (the same 132-SM GH100)",
         _GH100_CLUSTERS),
    _row("h100-pcie", (9, 0), 114, 227, 50, _HOPPER + ": H100 PCIe, 114 SMs, 50 MB L2"),
    _row("h200", (9, 0), 132, 227, 60,
         "NVIDIA H200 datasheet (2024): the GH100 of H100 SXM5, 132 SMs; L2 (60 MiB) and "
         "max active clusters measured on an H200 (driver 580, HardwareInfo, 2026-11-28)",
         _GH100_CLUSTERS),
    _row("b200", (10, 0), 148, 227, 126, _BLACKWELL + ": B200, 148 SMs, 126 MB L2"),
    _row("gb200", (10, 0), 148, 227, 126,
         _BLACKWELL + ": GB200's Blackwell GPUs are B200s (148 SMs)"),
    _row("b300", (10, 3), 148, 227, 126,
         "NVIDIA Technical Blog 'Inside NVIDIA Blackwell Ultra' (2025-08): the full die has "
         "160 SMs; the SM count shipping B300/GB300 parts enable is not published, so "
         "B200's 148 is assumed (compile on the GPU, or set CUTECALL_DEVICE, for another)"),
    _row("a100", (8, 0), 108, 163, 40,
         "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs, 40 MB L2"),
    _row("l40s", (8, 9), 142, 99, 96, "NVIDIA L40S datasheet (2023): AD102, 142 SMs, 96 MB L2"),
    _row("rtx-5090", (12, 0), 170, 99, 96,
         "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025): GeForce RTX 5090, 170 SMs, "
         "96 MB L2"),
    _row("rtx-pro-6000", (12, 0), 188, 99, 128,
         "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025): RTX PRO 6000 Blackwell, "
         "188 SMs, 128 MB L2"),
    _row("gb10", (12, 1), 48, 99, 24,
         "NVIDIA DGX Spark / GB10 datasheet (2025): 6,144 CUDA cores = 48 SMs, 24 MB L2"),
)}

DEVICES = TABLE  # public name: cutecall.DEVICES

# The row a compile for an arch uses when no GPU of that arch is present.
DEFAULT_FOR_CAPABILITY = {(9, 0): "h100-sxm", (10, 0): "b200", (10, 3): "b300",
                          (8, 0): "a100", (8, 6): "l40s", (8, 9): "l40s",
                          (12, 0): "rtx-5090", (12, 1): "gb10"}


def capability_of(arch: str) -> tuple:
    """(10, 0) for "sm_100a" (also "sm_100", "sm_100f")."""
    digits = arch.removeprefix("sm_").rstrip("af")
    if not digits.isdigit() or len(digits) < 2:
        raise ValueError(f"cutecall: {arch!r} is not an arch name like 'sm_90a'")
    return int(digits[:-1]), int(digits[-1])


def named(name: str, arch: str | None = None) -> DeviceProps:
    """The row `name` (case and '_' or ' ' for '-' ignored); with `arch`, a
    ValueError unless the row is a GPU of that arch."""
    row = TABLE.get(name.strip().lower().replace("_", "-").replace(" ", "-"))
    if row is None:
        raise ValueError(f"cutecall: ${DEVICE_ENV}={name!r} names no known GPU; known: "
                         f"{', '.join(TABLE)}")
    if arch is not None and capability_of(arch) != row.capability:
        raise ValueError(f"cutecall: ${DEVICE_ENV}={name!r} is a compute capability "
                         f"{row.capability[0]}.{row.capability[1]} GPU, but the target arch "
                         f"is {arch!r}")
    return row


def for_arch(arch: str) -> DeviceProps:
    """The device a compile for `arch` sees without a GPU of that arch:
    ``$CUTECALL_DEVICE``'s row, else the arch's default row (B200 for
    sm_100a), else one derived from the arch's family."""
    env = os.environ.get(DEVICE_ENV)
    if env:
        return named(env, arch)
    capability = capability_of(arch)
    default = DEFAULT_FOR_CAPABILITY.get(capability)
    if default is not None:
        return TABLE[default]
    nearest = next((TABLE[n] for c, n in sorted(DEFAULT_FOR_CAPABILITY.items(), reverse=True)
                    if c[0] == capability[0]), TABLE["h100-sxm"])
    return dataclasses.replace(nearest, name=f"{arch} (as {nearest.name})",
                               capability=capability)


def from_driver(props: dict, name: str = "") -> DeviceProps:
    """A device as its driver describes it (``_core.device_props``): the
    matching row of :data:`TABLE` (same capability and SM count; its
    numbers become the device's), else the driver's own numbers."""
    capability = tuple(props["capability"])
    env = os.environ.get(DEVICE_ENV)
    if env:
        return named(env, f"sm_{capability[0]}{capability[1]}a")
    same = [row for row in TABLE.values()
            if row.capability == capability and row.sm_count == props["sm_count"]]
    for row in same:  # the row whose L2 is the driver's, else the first
        if row.l2_bytes == props.get("l2_bytes"):
            return row
    if same:
        return same[0]
    return DeviceProps(name or f"sm_{capability[0]}{capability[1]} with "
                       f"{props['sm_count']} SMs", capability, int(props["sm_count"]),
                       int(props["smem_per_block_optin"]), int(props["smem_per_sm"]),
                       int(props["l2_bytes"]), (), "the device's driver")
