"""The part ``cluster`` of ``bench/warm_start/run.py``: N processes, each with its own empty local tier (N
fresh "hosts"), start together against one shared remote tier and each get
the same K kernels.

  cold   the remote tier starts empty: each kernel is compiled by one
         process (its lease); the others wait and load it
  warm   the remote tier holds every kernel; the local tiers are empty again

Per run it records: compiles (across all N), ready_s (from the common start
until the last process holds all K kernels), bytes moved (remote reads and
writes, summed over the processes) and each remote get's latency (median
and p90 over every get) with the CPU time the getting process spent in it
(median): where latency far exceeds that CPU time, the processes are
queueing for cores.

The compile is a stand-in (``--compile-s`` of sleep, an object of
``--bytes``): this measures the store, the leases and the waits, not the
CuTe DSL, and lets 32 processes share a 2-core machine without measuring
CPU contention of real compiles. Everything else is the real path
(``lookup.load_or_compile``: local tier, remote tier, lease, signing).
Before the common start each process has done what a real one has by its
first kernel: imported the DSL (the entries' stamp reads its version) and
connected to the remote tier.

    python -m bench.warm_start.run cluster                # starts a redis-server
    python -m bench.warm_start.run cluster --remote redis://host:6379/0 --n 1 4 16
    python -m bench.warm_start.run cluster --remote file:///shared/dir
    python -m bench.warm_start.run cluster --out results.json --md cluster.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import hashlib, json, os, random, sys, time
from cutecall._driver.compiled import CompiledKernel
from cutecall._driver.store import config, lookup, stamps
tag, k, start, compile_s, size = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \
    float(sys.argv[4]), int(sys.argv[5])
names = [f"{tag}-kernel{i}" for i in range(k)]
random.seed(os.getpid())
random.shuffle(names)

def fake_compile(name):
    time.sleep(compile_s)
    data = hashlib.sha256(name.encode()).digest() * (size // 32)
    return CompiledKernel(name=name, key=hashlib.sha256(name.encode()).hexdigest(),
                          module=data, sha256=hashlib.sha256(data).hexdigest(),
                          function="f", plan=(1,), operand_names="a", symbol_names="",
                          num_slots=1, arch="sm_90a", compile_seconds=compile_s)

# What a real process has done before its first kernel: imported the DSL
# (the stamp reads its version) and connected (here: one round trip).
stamps.kernel_stamp("sm_90a")
config.remote_tier().backend.ping()
open(os.path.join(sys.argv[6], str(os.getpid())), "w").close()   # ready
while not os.path.exists(os.path.join(sys.argv[6], "go")):
    time.sleep(0.005)
start = float(open(os.path.join(sys.argv[6], "go")).read())
time.sleep(max(0.0, start - time.time()))
gets = []
for name in names:
    t, cpu = time.perf_counter(), time.process_time()
    kernel, how = lookup.load_or_compile(hashlib.sha256(name.encode()).hexdigest(), name,
                                          "sm_90a", lambda: fake_compile(name))
    gets.append((how, time.perf_counter() - t, time.process_time() - cpu))
ready = time.time() - start
c = config.remote_tier().counters
print(json.dumps({"ready_s": ready, "gets": gets,
                  "bytes": c["bytes_in"] + c["bytes_out"]}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(workdir: str):
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not on PATH: apt-get install redis-server, or pass "
                 "--remote URL")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save",
                             "", "--appendonly", "no", "--dir", workdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    import redis
    client = redis.Redis.from_url(url)
    for _ in range(200):
        try:
            client.ping()
            return proc, url
        except redis.ConnectionError:
            time.sleep(0.05)
    sys.exit("redis-server did not start")


def run(n: int, k: int, remote: str, tag: str, workdir: str, args) -> dict:
    """One start of `n` processes with empty local tiers; their results."""
    hosts = tempfile.mkdtemp(prefix=f"hosts-{n}-", dir=workdir)
    ready = tempfile.mkdtemp(prefix="ready-", dir=workdir)
    env = dict(os.environ, CUTECALL_CACHE_REMOTE=remote, CUTECALL_LOG="warning")
    procs = [subprocess.Popen(
        [sys.executable, "-c", CHILD, tag, str(k), "0", str(args.compile_s),
         str(args.bytes), ready], env=dict(env, CUTECALL_CACHE_DIR=os.path.join(hosts, str(i))),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    while len(os.listdir(ready)) < n:     # every process imported and connected
        if any(p.poll() is not None for p in procs):
            sys.exit("a process failed:\n" + "".join(p.communicate()[1] for p in procs
                                                    if p.poll() is not None))
        time.sleep(0.05)
    with open(os.path.join(ready, "go.tmp"), "w") as f:
        f.write(str(time.time() + 0.5))
    os.replace(os.path.join(ready, "go.tmp"), os.path.join(ready, "go"))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        if p.returncode != 0:
            sys.exit(f"a process failed:\n{err}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    shutil.rmtree(hosts, ignore_errors=True)
    gets = [g for o in outs for g in o["gets"]]
    remote_ms = sorted(s * 1000 for how, s, _ in gets if how == "remote")
    cpu_ms = [c * 1000 for how, _, c in gets if how == "remote"]
    return {"n": n, "kernels": k, "compiles": sum(g[0] == "compiled" for g in gets),
            "remote_get_cpu_ms_median": round(statistics.median(cpu_ms), 2) if cpu_ms else None,
            "remote_hits": len(remote_ms), "ready_s": round(max(o["ready_s"] for o in outs), 3),
            "bytes_moved": sum(o["bytes"] for o in outs),
            "remote_get_ms_median": round(statistics.median(remote_ms), 2) if remote_ms else None,
            "remote_get_ms_p90": round(remote_ms[math.ceil(0.9 * len(remote_ms)) - 1], 2)
            if remote_ms else None}


def markdown(rows: list, meta: dict) -> str:
    lines = [f"## cluster.py, latest run: {meta['date']}", "",
             f"`{meta['command']}` on {meta['machine']}; Python {meta['python']}, "
             f"redis-server {meta['redis']}, redis-py {meta['redis_py']}; remote "
             f"`{meta['remote_kind']}`; stand-in compile {meta['compile_s']} s, "
             f"objects of {meta['bytes']} bytes.", "",
             "| start | N | kernels | compiles | remote hits | ready (s) | bytes moved "
             "| remote get median (ms) | p90 (ms) | its CPU, median (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['start']} | {r['n']} | {r['kernels']} | {r['compiles']} | "
                     f"{r['remote_hits']} | {r['ready_s']:.2f} | {r['bytes_moved']:,} | "
                     f"{r['remote_get_ms_median'] or '–'} | {r['remote_get_ms_p90'] or '–'} | "
                     f"{r['remote_get_cpu_ms_median'] or '–'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.warm_start.run cluster",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 16, 32])
    ap.add_argument("--kernels", type=int, nargs="+", default=[4, 8],
                    help="distinct kernels per start (each N runs with each)")
    ap.add_argument("--compile-s", type=float, default=1.0)
    ap.add_argument("--bytes", type=int, default=256 << 10)
    ap.add_argument("--remote", default=None, help="default: a redis-server started here")
    ap.add_argument("--out", default=None, help="write the rows as JSON")
    ap.add_argument("--md", default=None, help="append a section to this markdown file")
    args = ap.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="cutecall-cluster-")
    server, remote = (None, args.remote) if args.remote else start_redis(workdir)
    rows = []
    try:
        for k in args.kernels:
            for n in args.n:
                tag = hashlib.sha256(f"{time.time()}-{n}-{k}".encode()).hexdigest()[:8]
                for start in ("cold", "warm"):      # warm: the same kernels again
                    row = dict(run(n, k, remote, tag, workdir, args), start=start)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                    if args.out:    # after every run: a cut-off run keeps what it has
                        with open(args.out, "w") as f:
                            json.dump({"meta": _meta(args, remote), "rows": rows}, f, indent=2)
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    meta = _meta(args, remote)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)
    if args.md:
        with open(args.md, "a") as f:
            f.write("\n" + markdown(rows, meta))
    print(markdown(rows, meta))


def _meta(args, remote: str) -> dict:
    try:                                # a file:// run needs no redis-py
        import redis
        redis_py = redis.__version__
    except ImportError:
        redis_py = "not installed"
    found = shutil.which("redis-server")
    version = subprocess.run([found, "--version"], capture_output=True, text=True
                             ).stdout.split()[2] if found else "not installed"
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python " + " ".join(sys.argv),
            "machine": f"{platform.node() and 'this host'}: {os.cpu_count()} CPU cores, "
                       f"{platform.machine()}, {platform.system()} {platform.release()}",
            "python": platform.python_version(), "redis": version,
            "redis_py": redis_py, "remote_kind": remote.split(":")[0] + "://",
            "compile_s": args.compile_s, "bytes": args.bytes}

