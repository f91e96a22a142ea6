"""Helpers of the remote-tier tests: a real ``redis-server`` on a free
localhost port (installed with apt-get when missing and this runs as root,
else the tests skip saying why), and child processes that get kernels
through the real store path (local tier, remote tier, leases) with a cheap
stand-in for ``cute.compile`` that records each compile in a file."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from shared import child_env

PY = sys.executable
_INSTALL_TRIED = {}


def _redis_binary() -> str:
    """The redis-server binary, installing Debian's package if need be."""
    found = shutil.which("redis-server")
    if found:
        return found
    if "why" not in _INSTALL_TRIED:
        _INSTALL_TRIED["why"] = _install()
    found = shutil.which("redis-server")
    if not found:
        pytest.skip(f"redis-server is not on PATH and could not be installed "
                    f"({_INSTALL_TRIED['why']}); apt-get install redis-server to run "
                    f"the remote-tier tests")
    return found


def _install() -> str:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root, so no apt-get install"
    if not shutil.which("apt-get"):
        return "no apt-get on this machine"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", "redis-server"]):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if out.returncode != 0:
            return f"{' '.join(cmd)} failed: {(out.stderr or out.stdout).strip()[-300:]}"
    return "installed"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server of its own (no persistence), at `url`."""

    def __init__(self, tmp_path):
        pytest.importorskip("redis", reason="redis-py is not installed "
                                            "(pip install 'cutecall[redis]')")
        import redis
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [_redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis.from_url(self.url)
        deadline = time.time() + 20
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.fail("redis-server did not start")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture(params=["redis", "file"])
def remote(request, tmp_path):
    """The URL of an empty remote tier of each kind."""
    if request.param == "file":
        yield f"file://{tmp_path}/shared"
        return
    server = RedisServer(tmp_path)
    yield server.url
    server.stop()


def lease_of(url: str, name: str, value: str | None = None) -> str | None:
    """The value of kernel `name`'s lease in remote tier `url` (None: no
    lease); with `value`, first writes that lease as anyone who can write
    the tier could: no expiry in Redis, a far one in a file."""
    from cutecall._driver.store.stamps import kernel_stamp
    from cutecall._driver.store.remote_tier import RemoteTier
    lease = RemoteTier.name_for(key_of(name), kernel_stamp("sm_90a"))
    if url.startswith("redis://"):
        import redis
        client, at = redis.Redis.from_url(url), "cutecall:v1:l:" + lease
        if value is not None:
            client.set(at, value)
        got = client.get(at)
        return None if got is None else got.decode()
    path = os.path.join(url[len("file://"):], "v1", "leases", lease)
    if value is not None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"owner": value, "expires": 1e12}, f)
    try:
        with open(path) as f:
            return json.load(f)["owner"]
    except FileNotFoundError:
        return None


# A child "host": its own local tier, the shared remote tier, the real store
# path; the compile is a stand-in that sleeps (so others must wait) and
# appends the pid to counts/<name>. Prints {name: how} as JSON.
CHILD = r"""
import json, os, random, sys, time, hashlib
from cutecall._driver.compiled import CompiledKernel
from cutecall._driver.store import lookup
counts, names, start, slow = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3]), float(sys.argv[4])
random.seed(os.getpid())
random.shuffle(names)
time.sleep(max(0.0, start - time.time()))   # all processes start together

def key_of(name):
    return hashlib.sha256(name.encode()).hexdigest()

def module_of(name):
    return (name.encode() + b"|") * 2000

def fake_compile(name):
    with open(os.path.join(counts, name), "a") as f:
        f.write(f"{os.getpid()}\n")
    marker = os.environ.get("COMPILE_MARKER")
    if marker:
        open(marker, "w").write(str(os.getpid()))
    time.sleep(slow)
    data = module_of(name)
    return CompiledKernel(name=name, key=key_of(name), module=data,
                          sha256=hashlib.sha256(data).hexdigest(), function="f",
                          plan=(1, 2), operand_names="a", symbol_names="", num_slots=1,
                          arch="sm_90a", compile_seconds=slow)

hows = {}
for name in names:
    kernel, how = lookup.load_or_compile(key_of(name), name, "sm_90a",
                                          lambda: fake_compile(name))
    assert kernel.module == module_of(name), name
    hows[name] = how
print(json.dumps(hows))
"""


def start_hosts(tmp_path, n: int, names, remote: str, slow: float = 0.3,
                delay: float = 1.5, **env) -> list:
    """`n` child processes, each with its own empty local tier, asking for
    kernels `names` at once through remote tier `remote`."""
    counts = tmp_path / "counts"
    counts.mkdir(parents=True, exist_ok=True)
    start = time.time() + delay
    procs = []
    for i in range(n):
        e = child_env(CUTECALL_CACHE_DIR=str(tmp_path / f"host{i}"),
                      CUTECALL_CACHE_REMOTE=remote, **env)
        p = subprocess.Popen(
            [PY, "-c", CHILD, str(counts), ",".join(names), str(start), str(slow)],
            env=e, stdout=subprocess.PIPE, stderr=open(tmp_path / f"host{i}.err", "w"),
            text=True)
        p.err = tmp_path / f"host{i}.err"
        procs.append(p)
    return procs


def stderr_of(proc) -> str:
    return proc.err.read_text()


def finish(procs, timeout: float = 120) -> list:
    """(returncode, {name: how}, stderr) per process."""
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=timeout)
        hows = json.loads(stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
        out.append((p.returncode, hows, stderr_of(p)))
    return out


def compiles(tmp_path) -> dict:
    """{name: number of compiles} across every process."""
    counts = tmp_path / "counts"
    return {f.name: len(f.read_text().split()) for f in counts.iterdir()}


# -- in the test's process: fresh "hosts" (local tiers) and a stand-in compile ----
def fake(name: str, calls: list):
    """A compile of kernel `name` that records itself in `calls`."""
    from cutecall._driver.compiled import CompiledKernel
    data = (name.encode() + b"#") * 500

    def compile():
        calls.append(name)
        return CompiledKernel(name=name, key=key_of(name), module=data,
                              sha256=hashlib.sha256(data).hexdigest(), function="f",
                              plan=(1,), operand_names="a", symbol_names="", num_slots=1,
                              arch="sm_90a", compile_seconds=0.0)
    return compile


def key_of(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def get(name: str, calls: list, host) -> str:
    """How kernel `name` came to a fresh host (its own local tier `host`)."""
    from cutecall._driver.store import lookup
    os.environ["CUTECALL_CACHE_DIR"] = str(host)
    kernel, how = lookup.load_or_compile(key_of(name), name, "sm_90a", fake(name, calls))
    assert kernel.module == (name.encode() + b"#") * 500
    return how


@pytest.fixture
def hosts(tmp_path, monkeypatch):
    """Fresh local tiers, one per call of next(hosts)."""
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "h0"))
    return iter(tmp_path / f"h{i}" for i in range(1, 100))


def remote_name(name: str) -> str:
    """Kernel `name`'s key in Redis."""
    from cutecall._driver.store import stamps
    from cutecall._driver.store.remote_tier import RemoteTier
    return "cutecall:v1:e:" + RemoteTier.name_for(key_of(name),
                                                 stamps.kernel_stamp("sm_90a"))


# -- real CuTe DSL kernels for the distributed warm-up: 16 distinct keys ---------
def scale_bias(x, b, alpha):
    import cutecall
    from cutecall.examples import kernels
    call = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=lambda x, b: x,
                                 alpha=alpha, relu=False)
    return call(x, b)


def scale_bias_tasks(n: int = 16) -> list:
    """`n` warm-up tasks, one kernel each (alpha is compiled in)."""
    import functools
    import cutecall
    import jax
    import jax.numpy as jnp
    S = jax.ShapeDtypeStruct
    return [cutecall.jax_warmup_task(functools.partial(scale_bias, alpha=0.5 + i),
                                     S((64, 256), jnp.float32), S((256,), jnp.float32))
            for i in range(n)]
