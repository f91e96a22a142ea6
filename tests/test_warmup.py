"""Parallel warm-up (cutecall.warmup) on CPU: tasks compile into the shared
artifact store in workers forked from a preloaded fork server, or from a
process that runs no GPU client, so this process then loads every kernel
with zero compiles; a failing task and a killed worker are reported while
the rest complete, either way; unpicklable tasks are refused up front; how
workers start, and why; the CLI form."""

import functools
import os
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import cutecall
from cutecall.examples import kernels
from shared import child_env

S = jax.ShapeDtypeStruct


def add(a, b):
    return cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)(a, b)


def scale_bias(x, b):
    call = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=lambda x, b: x,
                                 alpha=2.0, relu=True)
    return call(x, b)


def fails():
    raise ValueError("this task fails on purpose")


def dies():
    os.kill(os.getpid(), signal.SIGKILL)


def tasks(n: int = 3000):
    """Two tasks of distinct kernels (module level: workers import them)."""
    return [cutecall.jax_warmup_task(add, S((n,), jnp.float32), S((n,), jnp.float32)),
            cutecall.jax_warmup_task(scale_bias, S((64, n), jnp.float16),
                                     S((n,), jnp.float16))]


TASKS = tasks(5000)
WITH_FAILURES = [fails, dies] + tasks(4000)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))
    cutecall.clear_cache()


def test_workers_fill_the_store_and_this_process_compiles_nothing(store):
    # This process may run JAX's CPU client: workers come from the fork server.
    report = cutecall.warmup(tasks(), workers=2, start="forkserver")
    assert not report.failed, str(report)
    assert [r.compiles for r in report.results] == [1, 1]
    before = cutecall.compile_stats()
    for task in tasks():
        task()                       # the same lowering, here
    after = cutecall.compile_stats()
    assert after["compiles"] == before["compiles"]
    assert after["disk_hits"] == before["disk_hits"] + 2


def test_a_failing_task_and_a_dead_worker_are_reported(store):
    report = cutecall.warmup(WITH_FAILURES, workers=2, start="forkserver")
    by_name = {r.name: r for r in report.results}
    assert by_name["fails"].error == "ValueError: this task fails on purpose"
    assert by_name["dies"].error == "worker process died"
    assert [r.compiles for r in report.results[2:]] == [1, 1]   # the rest completed
    assert "2 failed" in str(report)


def test_tasks_that_cannot_reach_a_worker_are_refused():
    with pytest.raises(TypeError, match="task 1 .* cannot be sent to a worker process"):
        cutecall.warmup([fails, lambda: None])
    with pytest.raises(TypeError, match="task 0 is not callable: 3"):
        cutecall.warmup([3])
    with pytest.raises(ValueError, match="workers must be an int >= 1, got 0"):
        cutecall.warmup([fails], workers=0)


def cli(tmp_path, *args):
    env = child_env(CUTECALL_CACHE_DIR=str(tmp_path / "cache"), CUTECALL_LOG="info")
    return subprocess.run([sys.executable, "-m", "cutecall", "warmup", *args],
                          env=env, capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(__file__))


@pytest.mark.parametrize("start, how", [
    ("auto", "by fork (no JAX backend in this process)"),
    ("forkserver", "by forkserver (asked for)")])
def test_the_cli_runs_a_task_list(tmp_path, start, how):
    # The CLI's process has imported JAX but started no backend: "auto"
    # forks it, and the workers inherit its imports.
    out = cli(tmp_path, "test_warmup:TASKS", "--workers", "2", "--start", start)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 tasks, 2 workers" in out.stdout and "0 failed" in out.stdout
    assert out.stdout.count("1 compiled, 0 from the store") == 2
    assert f"2 workers {how}, for sm_90a" in out.stderr, out.stderr


def test_a_module_import_that_starts_jax_means_a_fork_server(tmp_path):
    out = cli(tmp_path, "test_warmup:TASKS", "--workers", "2",
              "--preload", "starts_jax_on_import")
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("2 workers by forkserver (JAX has started its backends in this process, "
            "after importing the tasks' modules)") in out.stderr, out.stderr
    assert out.stdout.count("1 compiled, 0 from the store") == 2


def test_forked_workers_report_a_failing_task_and_a_dead_worker(tmp_path):
    out = cli(tmp_path, "test_warmup:WITH_FAILURES", "--workers", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "by fork" in out.stderr
    assert "fails: 0.0 s, error: ValueError: this task fails on purpose" in out.stdout
    assert "dies: 0.0 s, error: worker process died" in out.stdout
    assert out.stdout.count("1 compiled, 0 from the store") == 2
    assert "2 failed" in out.stdout


def test_a_process_with_a_jax_backend_does_not_fork_its_workers():
    from cutecall.services import workers as _warmup_start
    jnp.ones(1).block_until_ready()                  # JAX's CPU client is up
    assert _warmup_start.fork_blocker() == "JAX has started its backends in this process"
    assert _warmup_start.choose("auto", ["json"]) == (
        "forkserver", "JAX has started its backends in this process")
    assert _warmup_start.choose("fork", ["json"]) == ("fork", "asked for")
    with pytest.raises(ValueError, match=r"start must be one of \('auto', 'fork', "
                                         r"'forkserver'\), got 'spawn'"):
        cutecall.warmup([fails], start="spawn")


@pytest.mark.parametrize("start", ["auto", "forkserver"])
def test_workers_compile_for_the_callers_arch(tmp_path, monkeypatch, start):
    from cutecall._driver import target
    monkeypatch.delenv("CUTECALL_ARCH", raising=False)
    for arch in (None, "sm_100a"):
        if arch:
            monkeypatch.setenv("CUTECALL_ARCH", arch)
        out = tmp_path / f"{start}-{arch}"
        report = cutecall.warmup([functools.partial(write_env, str(out), "CUTECALL_ARCH")],
                                 workers=1, start=start)
        assert not report.failed, str(report)
        assert out.read_text() == (arch or target.default_arch())


def write_env(path, name):
    """Writes the worker's $name to `path` (module level: workers import it)."""
    with open(path, "w") as f:
        f.write(os.environ.get(name, "<unset>"))


def test_workers_see_the_environment_of_each_call(tmp_path, monkeypatch):
    # The fork server starts once per process, with the environment of then;
    # each warm-up's workers must still see the caller's environment now.
    for value in ("first", "second"):
        monkeypatch.setenv("CUTECALL_WARMUP_PROBE", value)
        out = tmp_path / value
        report = cutecall.warmup([functools.partial(write_env, str(out),
                                                    "CUTECALL_WARMUP_PROBE")], workers=1,
                                 start="forkserver")
        assert not report.failed, str(report)
        assert out.read_text() == value


def test_task_names_show_the_function_and_its_keywords():
    task = cutecall.jax_warmup_task(functools.partial(scale_bias), S((4, 8), jnp.float16),
                                    S((8,), jnp.float16))
    report = cutecall.warmup([functools.partial(write_env, os.devnull, "X"), task],
                             workers=1)
    assert [r.name for r in report.results] == [
        "write_env", "scale_bias"]
    assert cutecall.services.warmup._name(functools.partial(write_env, path="p")) == \
        "write_env(path='p')"


def test_preload_must_be_module_names():
    with pytest.raises(TypeError, match="preload must be a sequence of module names, "
                                        "got 'jax'"):
        cutecall.warmup([fails], preload="jax")
