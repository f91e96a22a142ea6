"""The processes of one job, as warm-up sees them: this process's rank, how
many there are, a barrier and a gather of small JSON-able reports.

Found from what the job already started, never started here:
``jax.distributed.initialize()`` (its coordination service: a barrier and a
key-value store, no devices touched, no JAX backend started) or
``torch.distributed.init_process_group()`` (``barrier`` and
``all_gather_object``).
"""

from __future__ import annotations

import itertools
import json
import sys

__all__ = ["Group", "current"]

TIMEOUT_S = 3600.0  # a barrier waits this long for the slowest process's compiles

_calls = itertools.count()  # every process calls in the same order: same tags


class Group:
    """`rank` of `size` processes, joined through `kind` ("jax" or "torch")."""

    def __init__(self, kind: str, rank: int, size: int, backend):
        self.kind, self.rank, self.size, self._backend = kind, rank, size, backend

    def __repr__(self):
        return f"Group({self.kind}.distributed, process {self.rank} of {self.size})"

    def gather(self, obj, tag: str) -> list:
        """`obj` (JSON-able) of every process, by rank; a barrier too."""
        tag = f"cutecall_warmup_{next(_calls)}_{tag}"
        if self.kind == "torch":
            out = [None] * self.size
            self._backend.all_gather_object(out, json.dumps(obj))
            return [json.loads(x) for x in out]
        client, ms = self._backend, int(TIMEOUT_S * 1000)
        client.key_value_set(f"{tag}/{self.rank}", json.dumps(obj))
        return [json.loads(client.blocking_key_value_get(f"{tag}/{r}", ms))
                for r in range(self.size)]

    def barrier(self, tag: str) -> None:
        tag = f"cutecall_warmup_{next(_calls)}_{tag}"
        if self.kind == "torch":
            self._backend.barrier()
        else:
            self._backend.wait_at_barrier(tag, int(TIMEOUT_S * 1000))


def _jax_state():
    if "jax" not in sys.modules:
        return None
    from jax._src import distributed
    return distributed.global_state


def current() -> Group | None:
    """The job's group: jax.distributed's if initialized, else
    torch.distributed's, else None."""
    state = _jax_state()
    if state is not None and state.client is not None:
        return Group("jax", int(state.process_id), int(state.num_processes), state.client)
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return Group("torch", dist.get_rank(), dist.get_world_size(), dist)
    return None
