"""Kernels compiled while the remote tier is down are published when it
answers again (``store/backlog.py``), so other hosts load them instead of
compiling them too. The remote tier is a ``file://`` directory made
unavailable (a file where its directory should be) then available; in this
process, with a stand-in compile (``remote_store.fake``)."""

import os

import pytest

from cutecall._driver.store import backlog, config, remote_tier
from cutecall._driver.store import ArtifactStore
from remote_store import get, hosts  # noqa: F401


@pytest.fixture
def outage(tmp_path, monkeypatch):
    """A file:// remote tier that is down until ``outage.end()``; a failed
    tier is tried again at once (not after a minute)."""
    shared = tmp_path / "shared"
    shared.write_text("not a directory")
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", f"file://{shared}")
    monkeypatch.setattr(remote_tier, "RETRY_S", 0.0)

    class Outage:
        @staticmethod
        def end():
            shared.unlink()
    return Outage


def test_kernels_compiled_while_the_remote_was_down_are_published_when_it_is_back(
        outage, hosts, monkeypatch):
    calls, host = [], next(hosts)
    with pytest.warns(RuntimeWarning, match="remote cache file://.* failed"):
        assert get("a", calls, host) == "compiled"
    assert get("b", calls, host) == "compiled"
    store = ArtifactStore(str(host))
    assert len(backlog.pending(store)) == 2
    outage.end()
    assert get("c", calls, host) == "compiled"   # answered: a and b go out too
    assert backlog.pending(store) == []
    assert config.remote_tier().backend.stats()["entries"] == 3
    other = next(hosts)
    assert [get(n, calls, other) for n in "abc"] == ["remote"] * 3
    assert calls == ["a", "b", "c"]              # no host compiled them again


def test_the_backlog_outlives_the_process_and_goes_out_a_few_at_a_time(
        outage, hosts, monkeypatch):
    calls, host = [], next(hosts)
    with pytest.warns(RuntimeWarning):
        for name in ("p", "q", "r"):
            assert get(name, calls, host) == "compiled"
    store = ArtifactStore(str(host))
    ArtifactStore(str(host)).remove(backlog.pending(store)[0])   # evicted meanwhile
    config._remote.clear()                         # a new process on this host
    monkeypatch.setattr(backlog, "AT_ONCE", 1)
    outage.end()
    assert get("s", calls, host) == "compiled"     # drops the evicted one, publishes one
    assert len(backlog.pending(store)) == 1
    assert get("t", calls, next(hosts)) == "compiled"   # by another host
    assert get("t", calls, host) == "remote"           # a contact that answered
    assert backlog.pending(store) == []
    assert config.remote_tier().backend.stats()["entries"] == 4   # two of p q r, s, t


def test_a_read_only_host_remembers_nothing(outage, hosts, monkeypatch):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_MODE", "read")
    host = next(hosts)
    with pytest.warns(RuntimeWarning):
        assert get("ro", [], host) == "compiled"
    assert backlog.pending(ArtifactStore(str(host))) == []
    assert not os.path.exists(os.path.join(str(host), "v1", "unpublished"))
