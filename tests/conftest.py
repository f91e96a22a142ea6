"""Shared fixtures. GPU tests carry @pytest.mark.gpu and skip cleanly when
the CUDA driver reports no device. Imports no framework: the torch front's
tests run where JAX is not installed (make test-torch-only)."""


import sys

import pytest

from cutecall import _core

HAS_GPU = _core.device_arch(0) is not None


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (the driver reports none)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _cutecall_cache_dir(tmp_path_factory):
    """The artifact store of the whole session lives in a tmp dir (shared by
    the subprocesses tests start), never in the user's ~/.cache."""
    patch = pytest.MonkeyPatch()
    patch.setenv("CUTECALL_CACHE_DIR", str(tmp_path_factory.mktemp("cutecall-cache")))
    yield
    patch.undo()


def _clear_in_process_caches():
    import cutecall
    cutecall.clear_cache()
    stage = sys.modules.get("cutecall._driver.outputs.stage")
    if stage is not None:  # where earlier tests' kernels write
        stage.forget()
    if "jax" in sys.modules:  # traces of call sites earlier tests made
        sys.modules["jax"].clear_caches()


@pytest.fixture
def fresh_key_space(tmp_path, monkeypatch):
    """A test that counts compiles sees none of the kernels earlier tests
    compiled: empty in-process caches (cutecall's and JAX's traces) and an
    empty artifact store of its own (the session's store is back
    afterwards)."""
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cutecall-cache"))
    _clear_in_process_caches()
    yield
    _clear_in_process_caches()


@pytest.fixture
def compiles(fresh_key_space):
    """Counts DSL compiles inside the test, in a fresh key space:
    compiles() -> number so far."""
    import cutecall
    start = cutecall.compile_stats()["compiles"]
    return lambda: cutecall.compile_stats()["compiles"] - start


@pytest.fixture
def x64():
    """64-bit dtypes (int64, uint64, float64) for the test: jax_enable_x64,
    restored afterwards."""
    import jax
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def single_accelerator(monkeypatch):
    """ejkernel's rule (cute_call outside shard_map on a multi-GPU host
    raises) would fire on every test of a 2-GPU machine: these tests are
    about one device, so the host counts as one. Tests of the rule patch the
    count themselves, after this."""
    from cutecall.compat import _ejkernel_cute_call
    original = _ejkernel_cute_call._accelerator_count
    if original() > 1:
        def one():
            return 1
        one.__wrapped__ = original  # for the tests of the count itself
        monkeypatch.setattr(_ejkernel_cute_call, "_accelerator_count", one)
