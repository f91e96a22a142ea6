"""Parallel warm-up: compile many specializations into the artifact store
with N worker processes, so later processes (and this one) load them.

``cute.compile`` is not thread-safe and holds the GIL, so parallel compiles
need processes. Every worker has JAX, the CuTe DSL and cutecall imported
(plus the modules in ``preload=`` and those the tasks are defined in)
before it starts, so N workers do not pay N imports: they fork from this
process while JAX has started no backend in it (``start="auto"``: they
inherit what it imported, and the call pays no start-up), else from a fork
server that imports them once (see ``cutecall.services.workers``). Each worker
gets this process's environment (``$CUTECALL_CACHE_DIR``, target arch) as it
is at the call, and starts no GPU client (it compiles, never runs); whatever
a task compiles lands in the store. Example::

    import cutecall

    report = cutecall.warmup([
        # every kernel of a jitted function, at these shapes
        cutecall.jax_warmup_task(my_model.step, params_spec, batch_spec),
        # a torch launch object's Kernel.compile for these tensor descriptions
        cutecall.torch_warmup_task(my_kernels.build_rmsnorm, (x_desc, w_desc)),
    ], workers=4)
    print(report)     # per task: seconds, compiles, store hits, or the error

A task is any picklable callable (a module-level function, or
``functools.partial`` of one); its return value is ignored. A task that
raises is reported and the rest go on; a worker that dies (killed, out of
memory) is reported as such, never waited on forever. Progress shows as a
``tqdm`` bar of tasks on stderr when it is a terminal (``CUTECALL_PROGRESS=1``:
always, ``0``: never), and as ``cutecall`` log lines; the workers show none.
``python -m cutecall warmup module:attr --workers 4`` runs the task list
``module.attr`` (a list, or a function returning one): ``warmup_cli``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pickle
import time
from typing import Callable, Sequence

from . import workers as _workers
from .._driver import progress
from .._driver.log import logger

__all__ = ["warmup", "jax_task", "torch_task", "jax_warmup_task", "torch_warmup_task",
           "WarmupReport", "TaskResult"]


@dataclasses.dataclass(frozen=True)
class TaskResult:
    name: str
    seconds: float
    compiles: int = 0
    disk_hits: int = 0
    error: str | None = None
    remote_hits: int = 0
    kernels: tuple = ()      # (key, name, arch, how) of each kernel it got


@dataclasses.dataclass(frozen=True)
class WarmupReport:
    results: tuple
    seconds: float
    workers: int
    start: str = ""          # how the workers started: "fork" or "forkserver"

    @property
    def failed(self) -> tuple:
        return tuple(r for r in self.results if r.error is not None)

    def __str__(self):
        how = f" by {self.start}" if self.start else ""
        lines = [f"cutecall warm-up: {len(self.results)} tasks, {self.workers} workers{how}, "
                 f"{self.seconds:.1f} s, {len(self.failed)} failed"]
        for r in self.results:
            what = f"error: {r.error}" if r.error else \
                f"{r.compiles} compiled, {r.disk_hits} from the store" + \
                (f", {r.remote_hits} from the remote tier" if r.remote_hits else "")
            lines.append(f"  {r.name}: {r.seconds:.1f} s, {what}")
        return "\n".join(lines)


def _lower(fn, specs):
    import jax
    jax.jit(fn).trace(*specs).lower(lowering_platforms=("cuda",))


def _compile_torch(factory, descs, kwargs):
    import cutecall.torch
    cutecall.torch.kernel(factory(), **kwargs).compile(*descs)


def jax_task(fn: Callable, *specs) -> Callable:
    """A task compiling every cutecall kernel `fn` calls at `specs`
    (``jax.ShapeDtypeStruct``s): ``jax.jit(fn)`` lowered for cuda."""
    return functools.partial(_lower, fn, specs)


def torch_task(factory: Callable, descs: Sequence, **kernel_kwargs) -> Callable:
    """A task running ``cutecall.torch.kernel(factory(), **kernel_kwargs)
    .compile(*descs)`` (descs: ``cutecall.torch.TensorDesc``, meta tensors
    or scalars). `factory` builds the launcher or kernel object."""
    return functools.partial(_compile_torch, factory, tuple(descs), kernel_kwargs)


# Their names in the package root (``cutecall.jax_warmup_task``).
jax_warmup_task, torch_warmup_task = jax_task, torch_task


def _name(task) -> str:
    f = _target(task)
    if isinstance(f, functools.partial):
        kw = ", ".join(f"{k}={v!r}" for k, v in f.keywords.items())
        base = getattr(f.func, "__qualname__", None) or repr(f.func)
        return f"{base}({kw})" if kw else base
    return getattr(f, "__qualname__", None) or repr(f)


def _target(task):
    """The user's function inside a task (jax_task / torch_task unwrapped)."""
    if isinstance(task, functools.partial) and task.func in (_lower, _compile_torch):
        return task.args[0]
    return task


def _modules(tasks, preload: Sequence[str]) -> list:
    """PRELOAD, `preload`, then the modules that define the tasks."""
    modules = list(_workers.PRELOAD) + list(preload)
    return modules + [m for m in _workers.defining_modules(_target(t) for t in tasks)
                      if m not in modules]


def warmup(tasks: Sequence[Callable], *, workers: int | None = None,
           preload: Sequence[str] = (), start: str = "auto",
           distributed: bool = False):
    """Runs `tasks` in `workers` processes (default: the CPU count, at most
    the number of tasks); returns a :class:`WarmupReport`. Tasks are handed
    out in order, so put the longest first. `preload`: more modules for the
    workers to have imported (e.g. ``("flash_attn.cute", "quack")``).
    `start`: "auto" (fork this process while JAX has started no backend in
    it, else a fork server), "fork" or "forkserver". A bar of the tasks
    shows on stderr when it is a terminal (``CUTECALL_PROGRESS``: 1 always,
    0 never).

    `distributed=True`, in every process of a job under ``jax.distributed``
    or ``torch.distributed``: each process compiles its share of `tasks`
    (every size-th from its rank on) with its `workers`, publishing to the
    remote tier (``CUTECALL_CACHE_REMOTE``); then all meet, and each copies
    the kernels the others compiled into its local tier. Returns a
    ``warmup_job.JobReport`` (who compiled what, the wait)::

        jax.distributed.initialize()
        report = cutecall.warmup(tasks, distributed=True, workers=4)
        print(report)   # process 0 of 8: 12 of 96 tasks, waited 3.1 s, ...
    """
    if distributed:
        from .warmup_job import warmup_job
        return warmup_job(tasks, compile_share, workers=workers, preload=preload,
                          start=start)
    _workers.check_start(start)
    tasks = list(tasks)
    if isinstance(preload, str) or not all(isinstance(m, str) for m in preload):
        raise TypeError(f"cutecall.warmup: preload must be a sequence of module "
                        f"names, got {preload!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError(f"cutecall.warmup: workers must be an int >= 1, got {workers!r}")
    for i, t in enumerate(tasks):
        if not callable(t):
            raise TypeError(f"cutecall.warmup: task {i} is not callable: {t!r}")
        try:
            pickle.dumps(t)
        except Exception as e:
            raise TypeError(f"cutecall.warmup: task {i} ({_name(t)}) cannot be sent "
                            f"to a worker process ({e}); use module-level functions "
                            f"or functools.partial of them") from e
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks) or 1))
    began, results = time.perf_counter(), {}
    modules = _modules(tasks, preload)
    with progress.bar(len(tasks), "cutecall warm-up", "task") as bar:
        bar.set_postfix_str("importing the tasks' modules")
        method, why = _workers.choose(start, modules)
        from .._driver.target import default_arch
        arch = default_arch()  # reads the driver, starts no GPU client
        logger.info("warm-up: %d workers by %s (%s), for %s", workers, method, why, arch)
        bar.set_postfix_str(f"{workers} workers by {method}")
        setup = (_workers.context(method, modules), (dict(os.environ), arch))

        def done(i, result):
            result = results[i] = TaskResult(_name(tasks[i]), *result)
            logger.info("warm-up: %s", _line(result))
            bar.update(1)

        # All tasks in one pool. A worker that dies breaks the pool without
        # saying which task it ran: the unfinished tasks then run one per
        # pool, so the one that dies is named.
        unfinished = _workers.run_pool(tasks, range(len(tasks)), workers, done, setup,
                                       bar.refresh)
        for i in unfinished:
            if _workers.run_pool(tasks, [i], 1, done, setup, bar.refresh):
                done(i, (0.0, 0, 0, "worker process died"))  # run_task's tuple
    report = WarmupReport(tuple(results[i] for i in range(len(tasks))),
                          time.perf_counter() - began, workers, method)
    logger.info("%s", str(report).splitlines()[0])
    return report


def compile_share(tasks, workers, preload, start) -> WarmupReport:
    """One process's share of a distributed warm-up: here, one task after
    another (`workers` None or 1), else in a pool of `workers` forked from a
    fork server. Never forked from this process: a fork cancels the calls
    of jax.distributed's coordination client (the job then aborts), and a
    torch.distributed process group does not survive one either."""
    if workers is None or workers == 1:
        began = time.perf_counter()
        results = tuple(TaskResult(_name(t), *_workers.run_task(t)) for t in tasks)
        return WarmupReport(results, time.perf_counter() - began, 1, "this process")
    return warmup(tasks, workers=workers, preload=preload,
                  start="forkserver" if start == "auto" else start)


def _line(r: TaskResult) -> str:
    return f"{r.name} failed: {r.error}" if r.error else \
        f"{r.name}: {r.compiles} compiled, {r.disk_hits} from the store in {r.seconds:.1f} s"
