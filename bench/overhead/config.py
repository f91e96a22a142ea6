"""The launch-overhead benchmark's settings and names: which paths it
measures, in which scenarios, and the ``Config`` every part reads. See
``run.py``'s docstring for what each path and scenario is."""

from __future__ import annotations

import dataclasses

DEFAULT_HANDLER_SO = "/tmp/cutecall_bench/libhandwritten_ffi.so"
CMDBUF_OFF_FLAG = "--xla_gpu_enable_command_buffer="
CMDBUF_OFF = "_cmdbuf_off"  # suffix of the columns measured with command buffers off

PATHS = ("cutecall", "handwritten", "handwritten_ex", "cutlass_jax", "tvm_ffi")
GRAPH_ONLY_PATHS = ("handwritten_ex",)
PATH_LABELS = {
    "cutecall": "cutecall",
    "handwritten": "hand-written FFI",
    "handwritten_ex": "hand-written FFI (DSL-style launch)",
    "cutlass_jax": "cutlass.jax",
    "tvm_ffi": "TVM-FFI (jax_tvm_ffi)",
    "xla": "XLA (x + s)",
}
SCENARIOS = ("unrolled", "unrolled_donate", "unrolled_cmdbuf_off", "fori", "fori_cmdbuf_off", "eager")
PARENT_SCENARIOS = ("eager", "unrolled", "unrolled_donate", "fori")
CHILD_SCENARIOS = ("unrolled", "fori")  # in the child, as <name>_cmdbuf_off
BLOCK_TRIALS = 7  # --trials default with --no-interleave


@dataclasses.dataclass
class Config:
    """Every knob of a run (``run.py``'s options); recorded in the JSON's
    ``meta.config``."""

    n: int = 1024
    unroll: int = 200
    fori: int = 1000
    trials: int = 15
    warmup: int = 3
    trial_ms: float = 40.0
    max_reps: int = 20000
    bw_gib: float = 1.0
    bw_trials: int = 10
    bw_reps: int = 8
    budget_s: float = 225.0
    child_timeout_s: float = 100.0
    paths: tuple[str, ...] = PATHS
    handler_so: str = DEFAULT_HANDLER_SO
    bandwidth: bool = True
    cmdbuf_off_child: bool = True
    interleave: bool = True
