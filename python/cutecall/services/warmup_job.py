"""Warm-up over a job: ``cutecall.warmup(tasks, distributed=True)``.

Every process of a ``jax.distributed`` or ``torch.distributed`` job calls it
with the same task list. Process ``r`` of ``n`` compiles tasks ``r, r + n,
...`` with its local workers (``warmup``); they publish to the remote tier
(``CUTECALL_CACHE_REMOTE``), where a kernel two tasks share is compiled once
(its lease). The processes then meet (a gather of their reports, which is
the barrier), and each copies every kernel the others compiled from the
remote tier into its local one, verified, compiling nothing. The report
says who compiled what and how long this process waited for the others.

Without a remote tier, the kernels reach the other processes only where
they share ``CUTECALL_CACHE_DIR`` (one host): a warning says so.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from typing import Callable, Sequence

from .._driver.log import logger
from .._driver.store import lookup
from . import cluster

__all__ = ["warmup_job", "JobReport"]


@dataclasses.dataclass(frozen=True)
class JobReport:
    """One process's view of a distributed warm-up."""

    rank: int
    size: int
    kind: str               # "jax" or "torch"
    tasks: int              # tasks in the whole job
    local: object           # this process's WarmupReport (its share)
    compiled_by: tuple      # per rank: the kernel names it compiled
    fetched: tuple          # per rank: the kernel names it got from the remote tier
    wait_s: float           # waiting for the others, after this share
    loaded: int             # kernels copied here from the remote tier
    missing: tuple          # kernel names the others got that could not be loaded
    seconds: float

    @property
    def failed(self) -> tuple:
        return self.local.failed

    @property
    def compiles(self) -> int:
        """Kernels compiled in the whole job."""
        return sum(len(c) for c in self.compiled_by)

    def __str__(self):
        lines = [f"cutecall distributed warm-up ({self.kind}.distributed, process "
                 f"{self.rank} of {self.size}): {len(self.local.results)} of {self.tasks} "
                 f"tasks here, {self.compiles} kernels compiled in the job, "
                 f"{self.seconds:.1f} s; waited {self.wait_s:.1f} s for the others; "
                 f"loaded {self.loaded} kernels from the remote tier"
                 + (f", {len(self.missing)} missing" if self.missing else "")
                 + (f"; {len(self.failed)} tasks failed" if self.failed else "")]
        for rank, (made, got) in enumerate(zip(self.compiled_by, self.fetched)):
            lines.append(f"  process {rank}: compiled {len(made)}"
                         + (f" ({', '.join(sorted(set(made)))})" if made else "")
                         + f", {len(got)} from the remote tier")
        return "\n".join(lines)


def _share(report) -> dict:
    """What this process tells the others: the kernels its tasks got."""
    return {"kernels": [list(k) for r in report.results for k in r.kernels]}


def warmup_job(tasks: Sequence[Callable], compile_share: Callable, *,
               workers: int | None = None, preload: Sequence[str] = (),
               start: str = "auto") -> JobReport:
    """``warmup(tasks, distributed=True)`` (see ``cutecall.warmup``):
    `compile_share(tasks, workers, preload, start)` compiles this process's
    share and returns its ``WarmupReport`` (``warmup.compile_share``)."""
    group = cluster.current()
    if group is None:
        raise ValueError("cutecall.warmup: distributed=True needs a job: call "
                         "jax.distributed.initialize() or "
                         "torch.distributed.init_process_group() first")
    if not os.environ.get("CUTECALL_CACHE_REMOTE"):
        warnings.warn("cutecall.warmup(distributed=True) without CUTECALL_CACHE_REMOTE: "
                      "processes share kernels only through a common CUTECALL_CACHE_DIR",
                      RuntimeWarning, stacklevel=3)
    tasks, began = list(tasks), time.perf_counter()
    mine = tasks[group.rank::group.size]
    logger.info("distributed warm-up: process %d of %d compiles %d of %d tasks",
                group.rank, group.size, len(mine), len(tasks))
    local = compile_share(mine, workers, preload, start)
    waited = time.perf_counter()
    everyone = group.gather(_share(local), "kernels")
    waited = time.perf_counter() - waited
    loaded, missing, here = 0, [], {k[0] for r in local.results for k in r.kernels}
    for rank, share in enumerate(everyone):
        for key, name, arch, _how in share["kernels"]:
            if key in here:
                continue
            here.add(key)
            if lookup.prefetch(key, name, arch):
                loaded += 1
            else:
                missing.append(name)
    report = JobReport(
        group.rank, group.size, group.kind, len(tasks), local,
        tuple(tuple(n for _, n, _, how in s["kernels"] if how == "compiled")
              for s in everyone),
        tuple(tuple(n for _, n, _, how in s["kernels"] if how == "remote")
              for s in everyone),
        waited, loaded, tuple(missing), time.perf_counter() - began)
    logger.info("%s", str(report).splitlines()[0])
    return report
