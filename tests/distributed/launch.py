"""Starts N worker processes the way multi-host jobs do, on this host: one
coordinator address on a free localhost port, a rank each, and a deadline
after which every process group is killed and the test fails with each
rank's last output.

Each rank gets RANK, WORLD_SIZE, COORDINATOR (host:port, jax.distributed),
MASTER_ADDR/MASTER_PORT and LOCAL_RANK (torch.distributed's env:// init).
A worker reports by printing one line ``RESULT=<json>``; :func:`spawn`
returns those dicts in rank order.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from shared import child_env

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int, **extra: str) -> dict:
    return child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                     COORDINATOR=f"127.0.0.1:{port}", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), **extra)


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def _tail(path: str, n: int = 3000) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-n:]


def spawn(script: str, world: int, *args: str, timeout: float = 240, **env: str) -> list:
    """Runs ``python script *args`` as `world` ranks; their RESULT dicts."""
    port = free_port()
    logs = tempfile.mkdtemp(prefix="cutecall-dist-")
    procs, outs = [], []
    try:
        for rank in range(world):
            out = (os.path.join(logs, f"{rank}.out"), os.path.join(logs, f"{rank}.err"))
            outs.append(out)
            with open(out[0], "w") as o, open(out[1], "w") as e:
                procs.append(subprocess.Popen(
                    [sys.executable, os.path.join(HERE, script), *args],
                    env=rank_env(rank, world, port, **env), stdout=o, stderr=e,
                    start_new_session=True))
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if any(p.poll() not in (None, 0) for p in procs):
                break  # one rank failed: the others would wait for it forever
            time.sleep(0.2)
        timed_out = any(p.poll() is None for p in procs)
        _kill(procs)
        report = "\n".join(f"--- rank {r} (rc {p.returncode}) stderr:\n{_tail(e)}\n"
                           f"stdout:\n{_tail(o, 1000)}"
                           for r, (p, (o, e)) in enumerate(zip(procs, outs)))
        if timed_out:
            raise AssertionError(f"ranks still running after {timeout} s\n{report}")
        if any(p.returncode != 0 for p in procs):
            raise AssertionError(f"a rank failed\n{report}")
        results = []
        for o, _ in outs:
            lines = [ln for ln in open(o).read().splitlines() if ln.startswith("RESULT=")]
            if not lines:
                raise AssertionError(f"a rank printed no RESULT line\n{report}")
            results.append(json.loads(lines[-1][len("RESULT="):]))
        return results
    finally:
        _kill(procs)
