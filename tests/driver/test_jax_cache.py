"""JAX's compile cache beside the remote tier (``cutecall.share_jax_cache``,
``CUTECALL_CACHE_JAX``), on CPU: a second process with empty local tiers
gets JAX cache hits for the program the first one compiled; a Redis URL
warns once and sets nothing. Counts JAX's own monitoring events, never
times."""

import json
import os
import subprocess
import sys
import warnings

import pytest

from cutecall._driver.store import jax_cache
from cutecall.jax import _cache

# One "host": its own empty local tier; imports cutecall.jax (the
# CUTECALL_CACHE_JAX hook) or calls share_jax_cache; compiles a small
# program; prints JAX's cache events and the directory in use.
CHILD = r"""
import json, os, sys
import jax, jax.numpy as jnp
from jax import monitoring
events = []
monitoring.register_event_listener(lambda name, **kw: events.append(name))
if sys.argv[1] == "call":
    import cutecall
    where = cutecall.share_jax_cache()
else:
    import cutecall.jax
    where = jax.config.jax_compilation_cache_dir

@jax.jit
def step(w, x):
    g = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * g
step(jnp.ones((16, 16)), jnp.ones((4, 16))).block_until_ready()
print(json.dumps({"dir": where,
                  "hits": events.count("/jax/compilation_cache/cache_hits"),
                  "misses": events.count("/jax/compilation_cache/cache_misses")}))
"""


def host(tmp_path, i, how, **env):
    full = dict(os.environ, JAX_PLATFORMS="cpu",
                CUTECALL_CACHE_DIR=str(tmp_path / f"host{i}"), **env)
    out = subprocess.run([sys.executable, "-c", CHILD, how], env=full, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["call", "env"])
def test_second_host_gets_jax_cache_hits(tmp_path, how):
    remote = tmp_path / "shared"
    env = {"CUTECALL_CACHE_REMOTE": f"file://{remote}"}
    if how == "env":
        env["CUTECALL_CACHE_JAX"] = "1"
    first = host(tmp_path, 0, how, **env)
    assert first["dir"] == str(remote / "jax")
    assert first["hits"] == 0 and first["misses"] >= 1
    stored = os.listdir(remote / "jax")
    assert any(name.startswith("jit_step") for name in stored), stored
    second = host(tmp_path, 1, how, **env)
    assert second["hits"] >= 1 and second["misses"] == 0, second


def test_no_remote_tier_uses_the_local_tier(tmp_path, monkeypatch):
    monkeypatch.delenv("CUTECALL_CACHE_REMOTE", raising=False)
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "local"))
    assert jax_cache.jax_cache_dir() == str(tmp_path / "local" / "jax")


def test_directory_for_each_url():
    assert jax_cache.jax_cache_dir("file:///shared/c") == "/shared/c/jax"
    assert jax_cache.jax_cache_dir("gs://bucket/c/") == "gs://bucket/c/jax"
    assert jax_cache.jax_cache_dir("/shared/c") == "/shared/c"
    with pytest.raises(ValueError, match="file:// URL takes an absolute path"):
        jax_cache.jax_cache_dir("file://host/c")
    with pytest.raises(ValueError, match="location=''"):
        jax_cache.jax_cache_dir("")


def test_redis_warns_once_and_sets_nothing(monkeypatch):
    import jax
    monkeypatch.setenv("CUTECALL_CACHE_REMOTE", "redis://:secret@10.0.0.5:6379/0")
    before = jax.config.jax_compilation_cache_dir
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _cache.share_jax_cache() is None
        assert _cache.share_jax_cache() is None
    texts = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(texts) == 1 and "needs a filesystem path or a bucket" in texts[0], texts
    assert "secret" not in texts[0] and "redis://10.0.0.5:6379/0" in texts[0]
    assert jax.config.jax_compilation_cache_dir == before


def test_bad_min_compile_time():
    with pytest.raises(ValueError, match="min_compile_time_s=-1"):
        _cache.share_jax_cache("/tmp/x", min_compile_time_s=-1)


def test_env_values(monkeypatch):
    for value, parsed in (("0", (False, None)), ("", (False, None)), ("1", (True, None)),
                          ("on", (True, None)), ("gs://b/j", (True, "gs://b/j"))):
        monkeypatch.setenv("CUTECALL_CACHE_JAX", value)
        assert jax_cache.from_env() == parsed, value
    monkeypatch.setenv("CUTECALL_CACHE_JAX", "0")
    assert _cache.share_from_env() is None
