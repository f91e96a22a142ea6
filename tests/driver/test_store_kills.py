"""The artifact store under 16 processes with kills (SIGKILL): two writers
killed inside the store's write (after their build, during the temp file's
slowed fsync), three processes at random times. Every entry left is whole
and verified, no corrupt entry is ever read, the torn writes leave only temp
files, and each key is built by at most one surviving process and published
once. Twenty runs, each with other kill times."""

import collections
import contextlib
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from cutecall._driver.store import ArtifactStore
from shared import child_env

PROCESSES, KEYS, KILLS = 16, 6, 5

WORKER = r"""
import os, random, sys, time
from cutecall._driver import store as store_mod
root, log, keys = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
real_fsync = os.fsync
def slow_fsync(fd):  # widen the write window, so kills land mid-write
    time.sleep(0.05 + random.random() * 0.05)
    real_fsync(fd)
os.fsync = slow_fsync
store = store_mod.ArtifactStore(root)
random.seed(os.getpid())
random.shuffle(keys)
def note(text):
    with open(log, "a") as f:
        f.write(f"{text} {os.getpid()}\n")
note("ready -")
while not os.path.exists(log + ".go"):  # all start together
    time.sleep(0.005)
for key in keys:
    def build(key=key):
        note(f"build-start {key}")
        time.sleep(random.random() * 0.03)
        note(f"build-done {key}")
        return {"name": key[:8]}, key.encode() * 20000
    entry, built = store.get_or_build(key, {"v": 1}, build)
    assert entry.data == key.encode() * 20000, "wrong data"
    note(f"{'published' if built else 'loaded'} {key}")
"""


def _lines(log: str) -> list:
    try:
        with open(log) as f:
            return [line.split() for line in f if line.count(" ") == 2]
    except FileNotFoundError:
        return []


def _count(log: str, what: str) -> int:
    return sum(1 for w, _, _ in _lines(log) if w == what)


@pytest.mark.parametrize("run", range(20))
def test_random_kills_leave_no_corrupt_entry_and_build_each_key_once(run, tmp_path):
    rng = random.Random(run)
    root, log = str(tmp_path / "cache"), str(tmp_path / "log")
    keys = [f"{run:04x}{k:04x}" * 4 for k in range(KEYS)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, root, log, ",".join(keys)],
                              env=child_env(), stderr=subprocess.PIPE)
             for _ in range(PROCESSES)]
    start = time.monotonic()
    while _count(log, "ready") < PROCESSES and time.monotonic() - start < 120:
        time.sleep(0.01)
    open(log + ".go", "w").close()
    killed = set()

    def kill(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
    # Two writers killed once their temp file exists: inside the store's
    # write (temp file, slowed fsync, rename). The rest at random times.
    entries = os.path.join(root, "v1", "entries")
    deadline = time.monotonic() + 10
    while len(killed) < 2 and time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(entries):   # <key>.ck.<pid>.<random>.tmp
                if name.endswith(".tmp") and len(killed) < 2:
                    pid = int(name.split(".")[2])
                    if pid not in killed:
                        kill(pid)
        time.sleep(0.001)
    for victim in rng.sample([p for p in procs if p.pid not in killed], KILLS - 2):
        time.sleep(rng.random() * 0.1)
        if victim.poll() is None:
            kill(victim.pid)
    for p in procs:
        p.wait(timeout=120)
        if p.pid not in killed:
            assert p.returncode == 0, p.stderr.read().decode()[-2000:]
    assert time.monotonic() - start < 120

    events = collections.defaultdict(list)
    for what, key, pid in _lines(log):
        events[key].append((what, int(pid)))
    for key in keys:
        done_alive = [p for w, p in events[key] if w == "build-done" and p not in killed]
        assert len(done_alive) <= 1, f"{key} built by {len(done_alive)} surviving processes"
        published = [p for w, p in events[key] if w == "published"]
        assert len(published) <= 1, f"{key} published {len(published)} times"

    store = ArtifactStore(root)
    torn = [f for f in os.listdir(store.entries_dir) if f.endswith(".tmp")]
    assert torn, "no kill landed inside a write"   # the two writers' temp files
    report = store.verify(repair=False)
    assert all(status == "ok" for _, status, _ in report), report
    # Every key is whole now, or absent (its builders all died): a new
    # process gets each one, building only the absent ones.
    for key in keys:
        entry, built = store.get_or_build(key, {"v": 1},
                                          lambda key=key: ({}, key.encode() * 20000))
        assert entry.data == key.encode() * 20000
        assert not built or not any(w == "published" for w, _ in events[key])
