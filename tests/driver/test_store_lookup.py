"""``store.lookup.load_kernel``: a kernel from the local tier, else the
remote one (a ``file://`` directory), verified, never compiled. In this
process, with a stand-in compile (``remote_store.fake``)."""

import os

from cutecall._driver.store import ArtifactStore, lookup, stamps
from remote_store import get, hosts, key_of  # noqa: F401


def test_load_kernel_reads_local_then_remote_and_compiles_nothing(tmp_path, hosts,
                                                                  monkeypatch):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", f"file://{tmp_path}/shared")
    os.environ["CUTECALL_CACHE_DIR"] = str(next(hosts))
    assert lookup.load_kernel(key_of("k"), "k", "sm_90a") is None   # no tier has it
    calls = []
    assert get("k", calls, next(hosts)) == "compiled" and calls == ["k"]

    host = next(hosts)                     # a fresh host: from the remote tier
    os.environ["CUTECALL_CACHE_DIR"] = str(host)
    kernel = lookup.load_kernel(key_of("k"), "k", "sm_90a")
    assert kernel.module == (b"k#") * 500 and kernel.key == key_of("k")
    assert kernel.name == "k" and kernel.plan == (1,) and calls == ["k"]
    local = ArtifactStore(str(host))
    assert [s for _, s, _ in local.verify(stamps.stamp_of)] == ["ok"]   # now local

    monkeypatch.delenv("CUTECALL_CACHE_REMOTE")   # the local tier alone has it
    assert lookup.load_kernel(key_of("k"), "k", "sm_90a").sha256 == kernel.sha256
    assert lookup.load_kernel(key_of("k"), "k", "sm_100a") is None  # another arch
    assert calls == ["k"]


def test_load_kernel_never_returns_a_corrupt_entry(hosts, monkeypatch):
    calls = []
    host = next(hosts)
    assert get("bad", calls, host) == "compiled"
    path = ArtifactStore(str(host)).path(key_of("bad"))
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 1
    open(path, "wb").write(bytes(data))
    assert lookup.load_kernel(key_of("bad"), "bad", "sm_90a") is None
    assert calls == ["bad"]


def test_without_a_store_load_kernel_finds_nothing(hosts, monkeypatch):
    get("off", [], next(hosts))
    monkeypatch.setenv("CUTECALL_CACHE", "0")
    assert lookup.load_kernel(key_of("off"), "off", "sm_90a") is None
