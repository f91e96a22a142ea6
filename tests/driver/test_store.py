"""The local tier of the store (``cutecall._driver.store.local``) and its CLI, on CPU.

Store semantics run against fake objects (fast); two tests go through the
real compile driver with a real CuTe DSL kernel, in this process and in fresh
processes. Every test uses its own cache directory, never ~/.cache.
"""

import hashlib
import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import pytest

import cutecall
from cutecall._driver.store import config, entry as entry_format, local, stamps
from cutecall import cli
from cutecall._driver.store import ArtifactStore, CacheError
from shared import ROOT, child_env

STAMP = {"format": 1, "cutecall": "test", "dsl": "1.0", "cuda": {}, "arch": "sm_90a"}
PY = sys.executable


def key_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def builder(data: bytes, calls: list):
    def build():
        calls.append(1)
        return {"name": "fake"}, data
    return build


@pytest.fixture
def store(tmp_path):
    return ArtifactStore(str(tmp_path / "cache"))


def test_miss_then_hit(store):
    calls, key = [], key_of("a")
    entry, built = store.get_or_build(key, STAMP, builder(b"object-a", calls))
    assert built and entry.data == b"object-a" and entry.meta == {"name": "fake"}
    again, built = store.get_or_build(key, STAMP, builder(b"other", calls))
    assert not built and again.data == b"object-a" and len(calls) == 1
    assert again.sha256 == hashlib.sha256(b"object-a").hexdigest()
    assert ArtifactStore(store.root).load(key, STAMP).data == b"object-a"


def test_layout_and_modes(store):
    key = key_of("m")
    store.get_or_build(key, STAMP, builder(b"x", []))
    for d in (store.root, store.base, store.entries_dir, store.locks_dir):
        assert os.stat(d).st_mode & 0o777 == 0o700, d
    assert os.stat(store.path(key)).st_mode & 0o777 == 0o600
    assert os.listdir(store.entries_dir) == [key + ".ck"]  # no temp file left


@pytest.mark.parametrize("field", ["dsl", "cutecall", "cuda", "arch"])
def test_version_change_invalidates(store, field):
    calls, key = [], key_of("v")
    store.get_or_build(key, STAMP, builder(b"old", calls))
    new = dict(STAMP, **{field: {"cuda-bindings": "99"} if field == "cuda" else "new"})
    assert store.load(key, new) is None
    entry, built = store.get_or_build(key, new, builder(b"new", calls))
    assert built and entry.data == b"new" and entry.stamp == new and len(calls) == 2
    assert store.load(key, STAMP) is None and store.load(key, new).data == b"new"


def _truncate(blob):
    return blob[:-7]


def _flip(offset):
    def flip(blob):
        b = bytearray(blob)
        b[offset] ^= 0x01
        return bytes(b)
    return flip


CORRUPTIONS = {
    "empty": lambda blob: b"",
    "truncated": _truncate,
    "header-only": lambda blob: blob[:20],
    "flip-magic": _flip(0),
    "flip-manifest": _flip(60),
    "flip-object": _flip(-3),
    "garbage": lambda blob: os.urandom(len(blob)),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_corruption_detected_and_rebuilt(store, how):
    calls, key = [], key_of("c")
    data = bytes(range(256)) * 8
    store.get_or_build(key, STAMP, builder(data, calls))
    path = store.path(key)
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(CORRUPTIONS[how](blob))
    with pytest.raises(entry_format.CorruptEntry):
        store.read(key)
    assert store.load(key, STAMP) is None  # never loaded
    entry, built = store.get_or_build(key, STAMP, builder(data, calls))
    assert built and entry.data == data and len(calls) == 2
    assert store.read(key).data == data  # the rebuilt file is whole


def test_verify_removes_corrupt_keeps_stale(store):
    good, bad, stale = key_of("g"), key_of("b"), key_of("s")
    for k in (good, bad):
        store.get_or_build(k, STAMP, builder(b"data" * 100, []))
    store.get_or_build(stale, dict(STAMP, dsl="0.9"), builder(b"old", []))
    with open(store.path(bad), "r+b") as f:
        f.truncate(50)
    report = {k: s for k, s, _ in store.verify(lambda e: STAMP)}
    assert report[good] == "ok" and report[stale] == "stale"
    assert report[bad].startswith("corrupt: ")
    assert not os.path.exists(store.path(bad)) and os.path.exists(store.path(stale))


def test_failed_write_leaves_no_file(store, monkeypatch):
    key = key_of("w")

    def fail(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.warns(RuntimeWarning, match="could not write cache entry"):
        entry, built = store.get_or_build(key, STAMP, builder(b"abc", []))
    assert built and entry.data == b"abc"  # the kernel is still returned
    assert os.listdir(store.entries_dir) == []


def test_orphaned_temp_files_ignored_then_removed(store):
    store.ensure()
    tmp = store.path(key_of("t")) + ".999.dead.tmp"
    with open(tmp, "wb") as f:
        f.write(b"half an entry")
    assert store.stats()["entries"] == 0 and os.path.exists(tmp)  # young: kept
    os.utime(tmp, (1, 1))
    store.scan()
    assert not os.path.exists(tmp)


def test_bad_keys_rejected(store):
    for bad in ("../../etc/passwd", "ABCDEF12", "", "abc"):
        with pytest.raises(ValueError, match="cache key"):
            store.path(bad)


# -- permissions ---------------------------------------------------------------
@pytest.mark.parametrize("where", ["root", "v1"])
def test_refuses_directory_others_can_write(tmp_path, where):
    store = ArtifactStore(str(tmp_path / "cache"))
    store.ensure()
    path = store.root if where == "root" else store.base
    os.chmod(path, 0o777)
    with pytest.raises(CacheError, match="writable by group or others") as e:
        ArtifactStore(store.root).ensure()
    assert path in str(e.value) and "0o777" in str(e.value)


def test_refuses_directory_of_another_user(tmp_path):
    if os.getuid() != 0:
        pytest.skip("chown to another uid needs root")
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, -1)
    with pytest.raises(CacheError, match="owned by uid 12345") as e:
        ArtifactStore(str(root)).ensure()
    assert str(root) in str(e.value)


def test_refuses_a_file(tmp_path):
    (tmp_path / "cache").write_text("not a directory")
    with pytest.raises(CacheError, match="is not a directory"):
        ArtifactStore(str(tmp_path / "cache")).ensure()


# -- eviction ------------------------------------------------------------------
def test_lru_eviction(tmp_path):
    data = b"x" * 10_000
    size = len(entry_format.encode(key_of("p"), STAMP, {"name": "fake"}, data))
    store = ArtifactStore(str(tmp_path / "cache"), max_bytes=3 * size + 64)
    a, b, c, d = (key_of(s) for s in "abcd")
    for i, k in enumerate((a, b, c)):
        store.get_or_build(k, STAMP, builder(data, []))
        os.utime(store.path(k), (1000 + i, 1000 + i))  # a oldest, c newest
    assert store.load(a, STAMP) is not None  # a hit makes a the most recent
    store.get_or_build(d, STAMP, builder(data, []))
    left = {k for k, _ in store.scan()}
    assert left == {a, c, d}  # b, least recently used, went
    assert store.stats()["bytes"] <= store.max_bytes
    assert not os.path.exists(os.path.join(store.locks_dir, b + ".lock"))


# -- environment ---------------------------------------------------------------
def test_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("CUTECALL_CACHE_MAX_BYTES", "512M")
    s = config.default_store()
    assert s.root == str(tmp_path / "c") and s.max_bytes == 512 << 20
    monkeypatch.setenv("CUTECALL_CACHE", "0")
    assert config.default_store() is None
    monkeypatch.setenv("CUTECALL_CACHE", "maybe")
    with pytest.raises(ValueError, match="CUTECALL_CACHE='maybe'"):
        config.default_store()
    monkeypatch.setenv("CUTECALL_CACHE", "1")
    monkeypatch.setenv("CUTECALL_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="CUTECALL_CACHE_MAX_BYTES='lots'"):
        config.default_store()
    assert config.parse_size("2G") == 2 << 30 and config.parse_size("1024") == 1024
    monkeypatch.delenv("CUTECALL_CACHE_DIR")
    monkeypatch.delenv("CUTECALL_CACHE_MAX_BYTES")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config.default_store().root == str(tmp_path / "home/.cache/cutecall")


# -- concurrent processes ------------------------------------------------------
WARM = r"""
import os, random, sys, time
from cutecall._driver.store import ArtifactStore
root, counts, keys, start = sys.argv[1], sys.argv[2], sys.argv[3].split(","), float(sys.argv[4])
store = ArtifactStore(root)
random.seed(os.getpid())
random.shuffle(keys)
time.sleep(max(0.0, start - time.time()))  # all processes start together
for key in keys:
    def build(key=key):
        with open(os.path.join(counts, key), "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.2)  # a slow compile: others must wait, not compile
        return {"name": key[:8]}, key.encode() * 1000
    entry, built = store.get_or_build(key, {"v": 1}, build)
    assert entry.data == key.encode() * 1000
"""


def test_eight_processes_compile_each_key_once(tmp_path):
    counts = tmp_path / "counts"
    counts.mkdir()
    keys = [key_of(str(i)) for i in range(5)]
    root = str(tmp_path / "cache")
    start = time.time() + 1.0
    procs = [subprocess.Popen([PY, "-c", WARM, root, str(counts), ",".join(keys),
                               str(start)], env=child_env()) for _ in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    for key in keys:
        assert len((counts / key).read_text().split()) == 1, key  # compiled once
    store = ArtifactStore(root)
    assert sorted(k for k, _ in store.scan()) == sorted(keys)
    assert all(status == "ok" for _, status, _ in store.verify(lambda e: {"v": 1}))
    assert sorted(os.listdir(store.entries_dir)) == sorted(k + ".ck" for k in keys)


# -- the compile driver, real CuTe DSL kernels ---------------------------------
S = jax.ShapeDtypeStruct


def vector_add_call():
    from cutecall.examples import kernels
    return cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=S((1000,), jnp.float32))


def test_driver_loads_from_disk_in_process(monkeypatch, tmp_path, compiles):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))
    args = (S((1000,), jnp.float32),) * 2
    cutecall.clear_cache()
    first = vector_add_call().lower(*args).as_text()
    assert compiles() == 1 and len(ArtifactStore(str(tmp_path / "cache")).scan()) == 1
    cutecall.clear_cache()
    hits = cutecall.compile_stats()["disk_hits"]
    second = vector_add_call().lower(*args).as_text()
    assert compiles() == 1 and cutecall.compile_stats()["disk_hits"] == hits + 1
    assert first == second  # same object bytes and plan in the custom call
    report = ArtifactStore(str(tmp_path / "cache")).verify(cli.cache._stamp_for)
    assert [status for _, status, _ in report] == ["ok"]  # current, not stale


def test_driver_refuses_unsafe_directory(monkeypatch, tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o775)
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(root))
    cutecall.clear_cache()
    with pytest.raises(CacheError, match=str(root)):
        vector_add_call().lower(S((1000,), jnp.float32), S((1000,), jnp.float32))


PROGRAM = r"""
import hashlib, json, jax, jax.numpy as jnp, cutecall
from cutecall.examples import kernels
S = jax.ShapeDtypeStruct
call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=S((1000,), jnp.float32))
text = call.lower(S((1000,), jnp.float32), S((1000,), jnp.float32)).as_text()
print(json.dumps(dict(cutecall.compile_stats(), text=hashlib.sha256(text.encode()).hexdigest())))
"""


def run_program(cache):
    env = child_env(CUTECALL_CACHE_DIR=str(cache))
    out = subprocess.run([PY, "-c", PROGRAM], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    cold = run_program(cache)
    warm = run_program(cache)
    assert (cold["compiles"], cold["disk_hits"]) == (1, 0)
    assert (warm["compiles"], warm["disk_hits"]) == (0, 1)
    assert warm["text"] == cold["text"]
    (key, _), = ArtifactStore(str(cache)).scan()
    with open(ArtifactStore(str(cache)).path(key), "r+b") as f:
        f.truncate(100)  # corrupt: the next process must compile again
    again = run_program(cache)
    assert (again["compiles"], again["disk_hits"]) == (1, 0) and again["text"] == cold["text"]


# -- CLI -------------------------------------------------------------------------
def fill(root, n=3):
    store = ArtifactStore(str(root))
    stamp = stamps.kernel_stamp("sm_90a")
    keys = [key_of(f"cli{i}") for i in range(n)]
    for k in keys:
        store.get_or_build(k, stamp, lambda k=k: (
            {"name": "FlashAttentionForwardSm90_kern_" + k[:4]}, b"o" * 500))
    return store, keys


def test_cli_cache_commands(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))
    store, keys = fill(tmp_path / "cache")
    assert cli.main(["cache", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entries"] == 3 and stats["root"] == store.root
    assert cli.main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert all(k[:16] in out for k in keys) and "3 entries" in out
    assert all(f"FlashAttentionForwardSm90_kern_{k[:4]}" in out for k in keys)  # whole names
    with open(store.path(keys[0]), "r+b") as f:
        f.truncate(10)
    assert cli.main(["cache", "verify"]) == 1  # found (and removed) one
    assert "removed " + keys[0] in capsys.readouterr().out
    assert cli.main(["cache", "verify"]) == 0
    assert cli.main(["cache", "clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert store.stats()["entries"] == 0
    monkeypatch.setenv("CUTECALL_CACHE", "0")
    with pytest.raises(SystemExit, match="CUTECALL_CACHE=0"):
        cli.main(["cache", "stats"])


def test_cli_reports_unsafe_directory(monkeypatch, tmp_path, capsys):
    root = tmp_path / "cache"
    root.mkdir()
    os.chmod(root, 0o777)
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(root))
    assert cli.main(["cache", "stats"]) == 1
    assert "writable by group or others" in capsys.readouterr().err


def test_cli_export_dispatch(monkeypatch, capsys):
    from cutecall.bundle import _write
    seen = []
    monkeypatch.setattr(_write, "export_cli", lambda argv: seen.append(argv) or 0)
    assert cli.main(["export", "k.py", "--out", "b"]) == 0 and seen == [["k.py", "--out", "b"]]


def test_python_m_cutecall(tmp_path):
    env = child_env(CUTECALL_CACHE_DIR=str(tmp_path / "cache"))
    fill(tmp_path / "cache", n=2)
    out = subprocess.run([PY, "-m", "cutecall", "cache", "stats", "--json"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["entries"] == 2
    out = subprocess.run([PY, "-m", "cutecall", "doctor", "--json"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = json.loads(out.stdout)["checks"]
    for name in ("gpu", "driver CUDA", "jax", "pytorch", "cute dsl", "runtime library"):
        assert checks[name], name
    assert "2 entries" in checks["cache"] and "0 corrupt" in checks["cache"]


def test_warm_start_bench_no_run(tmp_path):
    """bench/warm_start in its CPU mode: 10 compiles cold, 0 warm."""
    env = child_env()
    out = subprocess.run([PY, "-m", "bench.warm_start.run", "--no-run",
                          "--warm-runs", "1", "--cache-dir", str(tmp_path / "cache"),
                          "--out", str(tmp_path / "ws.json")], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    cold, warm = json.loads((tmp_path / "ws.json").read_text())["runs"]
    assert (cold["compiles"], cold["disk_hits"]) == (10, 0)
    assert (warm["compiles"], warm["disk_hits"]) == (0, 10)


def test_doctor_survives_missing_packages(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("torch", "cutlass", "cutlass.cute", "jax.numpy"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails
    monkeypatch.setenv("PATH", "")  # no nvidia-smi
    assert cli.main(["doctor"]) == 1  # a DSL that cannot import is a problem
    out = capsys.readouterr().out
    for line in ("gpu ", "driver CUDA", "pytorch", "cute dsl", "runtime library", "cache "):
        assert line in out, line
    assert "machine          compile-only machine: kernels compile and lower here" in out
    assert "cute dsl         error: nvidia-cutlass-dsl" in out
    assert "problems: cute dsl" in out


def test_lock_of_a_killed_builder_is_released(store):
    """A process that dies while compiling under a key's lock does not block
    the key: the kernel drops its flock."""
    key = key_of("killed")
    store.ensure()
    holder = subprocess.Popen(
        [PY, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
         store._lock_path(key)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with local.file_lock(store._lock_path(key), blocking=False) as held:
        assert not held  # busy while the holder lives
    holder.kill()
    holder.wait()
    entry, built = store.get_or_build(key, STAMP, builder(b"after", []))
    assert built and entry.data == b"after"


def test_a_store_that_cannot_be_created_warns_and_the_kernel_is_used(monkeypatch, compiles):
    # /proc takes no new directories, root or not: a read-only store location.
    monkeypatch.setenv("CUTECALL_CACHE_DIR", "/proc/cutecall-no-store/cache")
    cutecall.clear_cache()
    with pytest.warns(RuntimeWarning, match=r"artifact store /proc/cutecall-no-store/cache "
                      r"failed \(cutecall: cannot create cache directory"):
        lowered = vector_add_call().lower(S((1000,), jnp.float32), S((1000,), jnp.float32))
    assert "cutecall" in lowered.as_text() and compiles() == 1


def test_driver_survives_store_io_failure(monkeypatch, tmp_path, compiles):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(local, "file_lock", read_only)
    cutecall.clear_cache()
    with pytest.warns(RuntimeWarning, match="kernel 'vector_add' is used without it"):
        vector_add_call().lower(S((1000,), jnp.float32), S((1000,), jnp.float32))
    assert compiles() == 1


def test_cli_user_errors_and_a_closed_pipe_print_no_traceback(tmp_path):
    env = {**os.environ, "CUTECALL_CACHE_DIR": str(tmp_path / "cache")}
    cli_cmd = [PY, "-m", "cutecall.cli"]
    for args, message in ((["warmup", "nosuch:attr"], "cannot import module 'nosuch'"),
                          (["warmup", "cutecall:nosuch"], "has no attribute 'nosuch'")):
        out = subprocess.run(cli_cmd + args, capture_output=True, text=True, env=env,
                             timeout=120)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    # The reader of `cutecall doctor | head -0` is gone before the first line.
    proc = subprocess.Popen(cli_cmd + ["doctor"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_help_names_every_command_and_flag_in_whole_sentences(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for word in ("--cmakedir", "--includedir", "doctor", "cache", "export", "pack",
                 "warmup"):
        assert word in out, word
    with pytest.raises(SystemExit):
        cli.main(["warmup", "--help"])
    out = capsys.readouterr().out
    assert "Compile task lists into the store" in out
    assert "Exit status 1 when a task failed." in out
    assert out.rstrip().endswith("--remote redis://cache.internal:6379/0")
