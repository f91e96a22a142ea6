"""The remote tier (``CUTECALL_CACHE_REMOTE``) on a real redis-server and on
a ``file://`` directory, on CPU: one compile per kernel across 16
"hosts", a lease holder killed mid-compile, Redis stopped mid-run, signed
entries, read-only hosts. The hosts are child processes with their own
empty local tiers; their compile is a cheap stand-in (``remote_store.CHILD``)
and everything else (local tier, remote tier, leases) is the real path."""

import logging
import os
import re
import signal
import time

import pytest

from cutecall._driver.store import ArtifactStore, config, signing, stamps
from cutecall._driver.store.entry import decode
from remote_store import (redis_server, start_hosts, finish, compiles,  # noqa: F401
                          stderr_of, hosts, get, key_of, remote, remote_name, lease_of)

NAMES = [f"kernel{i}" for i in range(6)]


def test_sixteen_hosts_compile_six_kernels_six_times(tmp_path, remote):
    procs = start_hosts(tmp_path, 16, NAMES, remote, slow=0.3, delay=3.0)
    results = finish(procs)
    assert [rc for rc, _, _ in results] == [0] * 16, [err for _, _, err in results]
    assert compiles(tmp_path) == {n: 1 for n in NAMES}   # once across all 16
    hows = [how for _, h, _ in results for how in h.values()]
    assert hows.count("compiled") == 6 and hows.count("remote") == 16 * 6 - 6


def test_a_killed_lease_holder_is_taken_over_after_expiry(tmp_path, remote):
    """Signed leases: waiters wait while the holder renews its lease (a new
    signed token each time), and one takes over once it is killed."""
    marker = tmp_path / "compiling"
    lease = {"CUTECALL_CACHE_LEASE_S": "1.5", "CUTECALL_LOG": "info",
             "CUTECALL_CACHE_SIGNING_KEY": "s3cret"}
    holder, = start_hosts(tmp_path, 1, ["k"], remote, slow=120, delay=0,
                          COMPILE_MARKER=str(marker), **lease)
    deadline = time.time() + 60
    while not marker.exists():
        assert time.time() < deadline and holder.poll() is None
        time.sleep(0.05)
    waiters = start_hosts(tmp_path / "w", 3, ["k"], remote, slow=0.3, delay=0, **lease)
    while not all("remote wait: kernel 'k' is being compiled by" in stderr_of(w)
                  for w in waiters):    # they wait on the holder's lease
        assert time.time() < deadline and holder.poll() is None
        time.sleep(0.05)
    tokens = {lease_of(remote, "k")}
    while len(tokens) < 4:              # three renewals while they wait
        assert time.time() < deadline and holder.poll() is None
        tokens.add(lease_of(remote, "k"))
        time.sleep(0.05)
    assert None not in tokens and not any("take-over" in stderr_of(w) for w in waiters)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    results = finish(waiters)
    assert [rc for rc, _, _ in results] == [0] * 3, [err for _, _, err in results]
    assert compiles(tmp_path) == {"k": 1}           # the killed one's
    assert compiles(tmp_path / "w") == {"k": 1}     # one take-over, not three
    assert sorted(h["k"] for _, h, _ in results) == ["compiled", "remote", "remote"]
    assert sum("remote lease take-over: kernel 'k'" in err for _, _, err in results) == 1, \
        [err for _, _, err in results]
    assert not any("Traceback" in err for _, _, err in results)


def test_redis_stopped_mid_run_every_host_finishes_locally(tmp_path, redis_server):
    procs = start_hosts(tmp_path, 4, NAMES, redis_server.url, slow=0.5, delay=2.0,
                        CUTECALL_CACHE_REMOTE_TIMEOUT_S="2")
    deadline = time.time() + 60
    while not (tmp_path / "counts").exists() or not any((tmp_path / "counts").iterdir()):
        assert time.time() < deadline
        time.sleep(0.02)
    redis_server.stop()                  # a compile is under way
    results = finish(procs)
    for rc, hows, err in results:
        assert rc == 0 and sorted(hows) == sorted(NAMES), err
        assert err.count(f"cutecall: remote cache {redis_server.url} failed") == 1, err
        assert "Traceback" not in err


# -- in this process: signing, read-only, settings ------------------------------


def test_tampered_and_unsigned_entries_are_refused_by_name_and_rebuilt(
        redis_server, hosts, monkeypatch, caplog):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", redis_server.url)
    monkeypatch.setenv("CUTECALL_CACHE_SIGNING_KEY", "s3cret")
    calls, r = [], redis_server.client
    assert get("signed", calls, next(hosts)) == "compiled"
    assert get("signed", calls, next(hosts)) == "remote" and calls == ["signed"]
    value = bytearray(r.get(remote_name("signed")))
    value[-1] ^= 1                                   # one bit of the object
    r.set(remote_name("signed"), bytes(value))
    with caplog.at_level(logging.WARNING, "cutecall"):
        assert get("signed", calls, next(hosts)) == "compiled"
    assert "remote entry for kernel 'signed'" in caplog.text
    assert "refused: wrongly signed" in caplog.text and calls == ["signed"] * 2
    assert get("signed", calls, next(hosts)) == "remote"   # republished, signed

    name = remote_name("plain")
    tier = config.remote_tier()
    tier.signing_key = None                         # a host without the key publishes
    assert get("plain", calls, next(hosts)) == "compiled"
    tier.signing_key = b"s3cret"
    assert decode(signing.unwrap(name[len("cutecall:v1:e:"):], r.get(name), None),
                  key_of("plain")).meta["name"] == "plain"
    caplog.clear()
    with caplog.at_level(logging.WARNING, "cutecall"):
        assert get("plain", calls, next(hosts)) == "compiled"
    assert "remote entry for kernel 'plain'" in caplog.text
    assert "refused: unsigned, and CUTECALL_CACHE_SIGNING_KEY is set" in caplog.text


def test_without_a_key_a_corrupt_entry_is_refused_by_its_digest(redis_server, hosts,
                                                              monkeypatch, caplog):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", redis_server.url)
    calls = []
    assert get("corrupt", calls, next(hosts)) == "compiled"
    name = remote_name("corrupt")
    redis_server.client.set(name, redis_server.client.get(name)[:-10])
    with caplog.at_level(logging.WARNING, "cutecall"):
        assert get("corrupt", calls, next(hosts)) == "compiled"
    assert "refused: object is" in caplog.text


def test_a_read_only_host_fetches_and_never_publishes(redis_server, hosts, monkeypatch):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", redis_server.url)
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_MODE", "read")
    calls = []
    assert get("ro", calls, next(hosts)) == "compiled"
    assert redis_server.client.keys("cutecall:*") == []    # no entry, no lease
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_MODE", "readwrite")
    assert get("ro", calls, next(hosts)) == "compiled"     # publishes
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_MODE", "read")
    assert get("ro", calls, next(hosts)) == "remote" and len(calls) == 2


def test_an_fsspec_url_is_a_remote_tier(tmp_path, hosts, monkeypatch):
    pytest.importorskip("fsspec")
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", f"local://{tmp_path}/bucket")
    calls = []
    assert get("fs", calls, next(hosts)) == "compiled"
    host = next(hosts)
    assert get("fs", calls, host) == "remote" and calls == ["fs"]
    assert config.remote_tier().backend.stats()["entries"] == 1
    # the remote hit now sits in that host's local tier, verified
    local = ArtifactStore(str(host))
    assert [status for _, status, _ in local.verify(stamps.stamp_of)] == ["ok"]
    assert get("fs", calls, host) == "local"


def test_a_backend_that_answers_too_slowly_counts_as_down(hosts, monkeypatch):
    pytest.importorskip("redis", reason="the redis:// backend needs redis-py (cutecall[redis])")
    import socket
    silent = socket.socket()          # accepts connections, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", url)
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_TIMEOUT_S", "0.5")
    calls, began = [], time.monotonic()
    with pytest.warns(RuntimeWarning, match=f"remote cache {url} failed .*Timeout"):
        assert get("slow", calls, next(hosts)) == "compiled"
    assert time.monotonic() - began < 5 and calls == ["slow"]
    silent.close()


def test_a_backend_that_is_not_there_warns_once_and_compiles(hosts, monkeypatch):
    pytest.importorskip("redis", reason="the redis:// backend needs redis-py (cutecall[redis])")
    from remote_store import free_port
    url = f"redis://127.0.0.1:{free_port()}/0"           # nothing listens
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", url)
    calls = []
    with pytest.warns(RuntimeWarning, match=f"remote cache {url} failed"):
        assert get("down1", calls, next(hosts)) == "compiled"
    assert get("down2", calls, next(hosts)) == "compiled"   # no second try, no warning
    assert calls == ["down1", "down2"]


def test_a_missing_client_library_warns_once_and_compiles(hosts, monkeypatch):
    """redis:// without redis-py (as on a host that installed cutecall
    without the [redis] extra): one warning naming the extra, local compiles."""
    import sys
    monkeypatch.setitem(sys.modules, "redis", None)   # import redis fails
    monkeypatch.delitem(sys.modules, "cutecall._driver.store.redis_backend", raising=False)
    url = "redis://127.0.0.1:9/0"
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", url)
    calls = []
    with pytest.warns(RuntimeWarning, match=r"needs redis-py: pip install 'cutecall\[redis\]'"):
        assert get("noclient1", calls, next(hosts)) == "compiled"
    assert get("noclient2", calls, next(hosts)) == "compiled"
    assert calls == ["noclient1", "noclient2"]


@pytest.mark.parametrize("var, value, message", [
    ("CUTECALL_CACHE_REMOTE", "not a url", "is not a URL"),
    ("CUTECALL_CACHE_REMOTE_MODE", "write-only", "use read or readwrite"),
    ("CUTECALL_CACHE_LEASE_S", "-3", "is not a positive number of seconds"),
    ("CUTECALL_CACHE_REMOTE", "file://otherhost/x", "takes an absolute path"),
    ("CUTECALL_CACHE_REMOTE", "redis:/cache.internal:6379/0", "is not a URL"),
    ("CUTECALL_CACHE_REMOTE", "redis://:6379/0", "names no host"),
    ("CUTECALL_CACHE_REMOTE", "redis://host:63x9/0", "has a bad port"),
    ("CUTECALL_CACHE_REMOTE", "redis://host:6379/cache", "names database 'cache'"),
    ("CUTECALL_CACHE_REMOTE", "unix://run/redis.sock", "names no absolute path"),
    ("CUTECALL_CACHE_REMOTE", "htps://bucket/x", "has an unknown scheme 'htps'"),
    ("CUTECALL_CACHE_SIGNING_KEY", "", "is empty"),
    ("CUTECALL_CACHE_SIGNING_KEY", "  ", "is empty")])
def test_bad_settings_name_the_variable(monkeypatch, var, value, message):
    """Raised where the setting is first read, before any backend is made."""
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", "file:///tmp/x")
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=f"{var}={re.escape(repr(value))}.*{message}"):
        config.remote_settings()


# -- the CLI: cache stats shows both tiers, doctor checks the remote one -----------
def test_cache_stats_and_doctor_show_the_remote_tier(redis_server, hosts, monkeypatch,
                                                     capsys):
    import json
    from cutecall import cli
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", redis_server.url)
    get("cli", [], next(hosts))
    assert cli.main(["cache", "stats", "--json"]) == 0
    remote = json.loads(capsys.readouterr().out)["remote"]
    assert remote["url"] == redis_server.url and remote["entries"] == 1
    assert remote["bytes"] > 1000 and remote["mode"] == "readwrite"
    assert cli.main(["cache", "stats"]) == 0
    assert f"remote     {redis_server.url} (readwrite)" in capsys.readouterr().out
    assert cli.doctor._remote_health().startswith(f"{redis_server.url} reachable in ")
    redis_server.stop()
    assert cli.doctor._remote_health().startswith(f"error: {redis_server.url} unreachable")
    assert cli.main(["cache", "stats"]) == 0
    assert f"remote     {redis_server.url}: unreachable" in capsys.readouterr().out
    assert cli.main(["doctor", "--json"]) == 1          # a remote tier set but down
    assert "remote cache" in json.loads(capsys.readouterr().out)["problems"]
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", "redis:/cache.internal:6379/0")
    cli.main(["doctor", "--json"])
    doctor = json.loads(capsys.readouterr().out)
    assert "remote cache" in doctor["problems"]
    assert doctor["checks"]["remote cache"] == (
        "error: ValueError: cutecall: CUTECALL_CACHE_REMOTE='redis:/cache.internal:6379/0'"
        " is not a URL (redis://host:6379/0, unix:///run/redis.sock, "
        "file:///shared/path, gs://bucket/path)")
    monkeypatch.delenv("CUTECALL_CACHE_REMOTE")
    assert cli.doctor._remote_health() == "none (CUTECALL_CACHE_REMOTE is not set)"
    cli.main(["doctor", "--json"])
    assert "remote cache" not in json.loads(capsys.readouterr().out)["problems"]
