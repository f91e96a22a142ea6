"""The remote tier on Redis (redis-py): ``redis://host:6379/0``.

Values under ``cutecall:v1:e:<name>`` (``SET`` is atomic), leases under
``cutecall:v1:l:<name>`` taken with ``SET NX PX`` (Redis expires a dead
holder's lease by itself) and renewed (a new token) or dropped by a script
that first checks the value. Every call has a socket timeout, so a Redis that hangs
reads as down.
"""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

PREFIX = "cutecall:v1:"

_RENEW = """if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 else return 0 end"""
_RELEASE = """if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) else return 0 end"""


class RedisBackend:
    def __init__(self, url: str, timeout_s: float):
        self.url = url
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=min(timeout_s, 3.0),
            retry_on_timeout=False, retry=Retry(NoBackoff(), 0),
            health_check_interval=0)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    def __repr__(self):
        return f"RedisBackend({self.url!r})"

    def get(self, name: str) -> bytes | None:
        return self.client.get(PREFIX + "e:" + name)

    def put(self, name: str, value: bytes) -> None:
        self.client.set(PREFIX + "e:" + name, value)

    def acquire(self, name: str, owner: str, ttl_s: float) -> str | None:
        lease = PREFIX + "l:" + name
        if self.client.set(lease, owner, nx=True, px=max(1, int(ttl_s * 1000))):
            return None
        holder = self.client.get(lease)
        if holder is None:  # expired between the two calls: try once more
            return self.acquire(name, owner, ttl_s)
        return holder.decode(errors="replace")

    def renew(self, name: str, owner: str, renewed: str, ttl_s: float) -> bool:
        return bool(self._renew(keys=[PREFIX + "l:" + name],
                                args=[owner, renewed, max(1, int(ttl_s * 1000))]))

    def release(self, name: str, owner: str) -> None:
        self._release(keys=[PREFIX + "l:" + name], args=[owner])

    def stats(self) -> dict:
        entries = total = 0
        for k in self.client.scan_iter(match=PREFIX + "e:*", count=1000):
            entries += 1
            total += self.client.strlen(k)
        return {"entries": entries, "bytes": total}

    def ping(self) -> None:
        self.client.ping()
