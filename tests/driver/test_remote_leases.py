"""Compile leases in the remote tier are checked, not trusted: with a
signing key a lease not signed with it is refused and taken over, and in
any case a lease past its stated expiry, or one nobody renews, is taken
over after its time to live, not after ``CUTECALL_CACHE_REMOTE_WAIT_S``.
On a real redis-server and a ``file://`` directory, in this process, with
a stand-in compile (``remote_store.fake``)."""

import logging
import time

from cutecall._driver.store import lease, signing
from cutecall._driver.store.file_backend import FileBackend
from remote_store import get, hosts, lease_of, redis_server, remote  # noqa: F401

KEY = b"s3cret"


def test_a_lease_not_signed_with_the_key_is_refused_and_taken_over(
        remote, hosts, monkeypatch, caplog):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", remote)
    monkeypatch.setenv("CUTECALL_CACHE_SIGNING_KEY", KEY.decode())
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_WAIT_S", "600")
    lease_of(remote, "held", "mallory:1:abc")       # never expires in Redis
    calls = []
    with caplog.at_level(logging.WARNING, "cutecall"):
        assert get("held", calls, next(hosts)) == "compiled" and calls == ["held"]
    assert "remote lease for kernel 'held' refused: 'mallory:1:abc' is not signed " \
           "with CUTECALL_CACHE_SIGNING_KEY; it is deleted and taken over" in caplog.text
    assert "still compiled by" not in caplog.text
    assert lease_of(remote, "held") is None                  # dropped after the build
    assert get("held", calls, next(hosts)) == "remote" and calls == ["held"]


def test_without_a_key_a_lease_nobody_renews_is_taken_over_after_its_ttl(
        remote, hosts, monkeypatch, caplog):
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", remote)
    monkeypatch.setenv("CUTECALL_CACHE_LEASE_S", "0.5")
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE_WAIT_S", "600")
    lease_of(remote, "stuck", "someone")
    calls = []
    with caplog.at_level(logging.INFO, "cutecall"):
        assert get("stuck", calls, next(hosts)) == "compiled" and calls == ["stuck"]
    assert "remote wait: kernel 'stuck' is being compiled by 'someone'" in caplog.text
    assert "remote lease of kernel 'stuck', held by 'someone', is dead" in caplog.text
    assert "remote lease take-over: kernel 'stuck', held by 'someone'" in caplog.text
    assert "still compiled by" not in caplog.text


def test_a_refused_lease_that_keeps_coming_back_is_compiled_around(tmp_path, caplog):
    class Forger(FileBackend):             # rewrites the lease whenever it is dropped
        def release(self, name, owner):
            super().release(name, owner)
            self.acquire(name, "mallory:1:abc", 1e9)
    backend = Forger(f"file://{tmp_path}", str(tmp_path))
    backend.acquire("n", "mallory:1:abc", 1e9)
    counters = {"takeovers": 0, "waits": 0, "wait_s": 0.0}
    with caplog.at_level(logging.WARNING, "cutecall"):
        got = lease.single_flight(backend, "n", lambda: None, lambda: "built",
                                  owner="me:2:def", ttl_s=30, bound_s=600,
                                  label="kernel 'n'", counters=counters, key=KEY)
    assert got == ("built", "compiled")
    assert caplog.text.count("refused") == lease.FORGED_TRIES + 1
    assert "compiling without a lease" in caplog.text


def test_what_a_waiter_makes_of_a_lease():
    watch = lease.Watch("n", KEY, ttl_s=1.0, bound_s=600)
    mine = lease.token("n", "h:1:a", 60, KEY)
    assert watch.verdict(mine) == "live" and watch.holder(mine) == "h:1:a"
    watch.since -= 10      # unchanged for 10 s: within the signed lease's own 60 s
    assert watch.verdict(mine) == "live"
    watch.since -= 60      # not renewed for longer than its time to live
    assert watch.verdict(mine) == "dead"
    assert watch.verdict(lease.token("n", "h:1:a", 60, b"other")) == "refused"
    assert watch.verdict(lease.token("n", "h:1:a", 60, None)) == "refused"
    assert watch.verdict(lease.token("other-name", "h:1:a", 60, KEY)) == "refused"
    assert watch.verdict("?") == "live"     # a lease file being written
    body = f"h:1:a|{time.time() - 60:.3f}|60"
    assert watch.verdict(f"{body}|{signing.lease_mac(KEY, 'n', body)}") == "dead"
    assert watch.verdict(f"{body.replace('|60', '|999')}|{signing.lease_mac(KEY, 'n', body)}") \
        == "refused"                          # edited: its signature no longer fits

    keyless = lease.Watch("n", None, ttl_s=1.0, bound_s=600)
    unsigned = lease.token("n", "h:1:a", 3600, None)
    assert keyless.verdict(unsigned) == "live"
    keyless.since -= 2     # an unsigned lease counts no longer than the waiter's ttl
    assert keyless.verdict(unsigned) == "dead"
    expired = unsigned.replace(unsigned.split("|")[1], str(time.time() - 60))
    assert keyless.verdict(expired) == "dead"   # past its stated expiry: at once


def test_a_holder_renews_with_a_new_signed_token_and_drops_it(redis_server):
    from cutecall._driver.store.redis_backend import RedisBackend
    backend = RedisBackend(redis_server.url, 5.0)
    with lease._held(backend, "n", "me:1:a", 0.3, KEY) as other:
        assert other is None
        first = backend.client.get("cutecall:v1:l:n").decode()
        deadline = time.time() + 30
        while backend.client.get("cutecall:v1:l:n").decode() == first:
            assert time.time() < deadline
            time.sleep(0.02)
        renewed = lease.read_token("n", backend.client.get("cutecall:v1:l:n").decode(), KEY)
        assert renewed.signed and renewed.owner == "me:1:a"
        assert 0 < backend.client.pttl("cutecall:v1:l:n") <= 300
    assert backend.client.get("cutecall:v1:l:n") is None
