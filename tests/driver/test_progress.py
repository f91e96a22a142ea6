"""Long waits made visible (cutecall._driver.progress): a compile that runs
past the notice threshold shows one line on a terminal, ended by "done
(N s)" or "failed", whole lines in a log (CI), nothing when it is short;
under a bar the notice is the bar's text; a notebook gets tqdm.auto's bar,
a log a line at the start, at most every 30 s and at the end;
CUTECALL_PROGRESS=0 turns the display off; warm-up and autotune draw a tqdm
bar of their tasks and candidates (never in warm-up's workers; none without
tqdm); CUTECALL_LOG lines carry timestamps; a corrupt store entry logs a
WARNING naming its path, key and fault."""

import io
import logging
import re
import sys
import threading
import time
import types

import jax.numpy as jnp
import pytest

import cutecall
from cutecall._driver import log, progress
from cutecall._driver.store.local import ArtifactStore
from cutecall._driver.target import default_arch
from cutecall.examples import kernels, layouts
from shared import f32

LINE = re.compile(r"cutecall: compiling (\w+) for (sm_\w+)… done \((\d+\.\d) s\)\n")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def on_terminal(monkeypatch) -> Terminal:
    """sys.stderr becomes a captured stream that says it is a terminal, and
    CUTECALL_PROGRESS is unset. Called in the test's body: pytest's own
    capture sets sys.stderr again between a fixture and the test."""
    monkeypatch.delenv(progress.ENV, raising=False)
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


@pytest.fixture
def slow(monkeypatch):
    """Every compile counts as slow (the notice shows at 0 s)."""
    monkeypatch.setattr(progress, "NOTICE_AFTER_S", 0.0)


def timers():
    return [t for t in threading.enumerate() if isinstance(t, threading.Timer)]


def lower_add(n: int, name: str):
    cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a,
                          name=name, output_params=("c",)).lower(f32(n), f32(n))


def test_a_slow_compile_shows_one_line_ended_by_done(slow, compiles, monkeypatch):
    stderr = on_terminal(monkeypatch)
    lower_add(1000, "progress_add")
    assert compiles() == 1
    (line,) = LINE.findall(stderr.getvalue())
    assert line[:2] == ("progress_add", default_arch()) and LINE.fullmatch(stderr.getvalue())
    assert not timers()                        # the timer thread is gone


def test_a_short_compile_prints_nothing(compiles, monkeypatch):
    stderr = on_terminal(monkeypatch)
    lower_add(1000, "progress_add_short")      # threshold 2 s; this takes ~0.2 s
    assert compiles() == 1 and stderr.getvalue() == "" and not timers()


LOG_LINES = re.compile(r"cutecall: compiling (\w+) for (sm_\w+)… \(running for \d+ s\)\n"
                       r"cutecall: compiled \1 for \2 in \d+\.\d s\n")


def test_off_a_terminal_a_slow_compile_is_two_log_lines(monkeypatch, slow, compiles):
    plain = io.StringIO()                      # a CI log: not a terminal
    monkeypatch.setattr("sys.stderr", plain)
    monkeypatch.delenv(progress.ENV, raising=False)
    lower_add(1000, "progress_plain")
    assert LOG_LINES.fullmatch(plain.getvalue()), plain.getvalue()
    monkeypatch.setenv(progress.ENV, "0")      # never
    lower_add(1001, "progress_silenced")
    assert LOG_LINES.fullmatch(plain.getvalue()) and compiles() == 2


def test_progress_0_silences_a_terminal(slow, monkeypatch, compiles):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setenv(progress.ENV, "0")
    lower_add(1000, "progress_off")
    assert compiles() == 1 and stderr.getvalue() == ""


def test_a_bad_progress_value_warns_and_shows(monkeypatch):
    on_terminal(monkeypatch)
    monkeypatch.setenv(progress.ENV, "loud")
    with pytest.warns(RuntimeWarning, match="CUTECALL_PROGRESS='loud'"):
        assert progress.style() == progress.TERMINAL  # stderr is a terminal
    with pytest.warns(RuntimeWarning):
        assert progress.style(io.StringIO()) == progress.LOG


def test_a_failing_compile_ends_the_line_with_failed(slow, fresh_key_space, monkeypatch):
    stderr = on_terminal(monkeypatch)
    broken = cutecall.cutlass_call(layouts.copy_bits, output_shape_dtype=f32(8),
                                   name="progress_broken", expect="Float64",
                                   output_params=("out",))
    with pytest.raises(cutecall.CompileError, match="kernel 'progress_broken'"):
        broken.lower(f32(8))
    # the dynamic form, then the static fallback's: each compile ends its line
    lines = stderr.getvalue().splitlines(keepends=True)
    assert lines and set(lines) == {f"cutecall: compiling progress_broken for "
                                    f"{default_arch()}… failed\n"}
    assert not timers()


def test_a_slow_trace_of_unnamed_outputs_shows_its_own_line(slow, compiles, monkeypatch):
    """Outputs the call does not name are placed by a trace before the
    compile (``outputs.stage``): its line says tracing."""
    stderr = on_terminal(monkeypatch)
    cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a,
                          name="progress_unnamed").lower(f32(1000), f32(1000))
    assert compiles() == 1
    traced, compiled = stderr.getvalue().splitlines()
    assert traced.startswith("cutecall: tracing progress_unnamed for ") and "done" in traced
    assert LINE.fullmatch(compiled + "\n") and not timers()


def wait_for(predicate, seconds: float = 10.0):
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:
        time.sleep(0.01)
    return predicate()


def test_the_line_shows_while_the_compile_still_runs(monkeypatch):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setattr(progress, "NOTICE_AFTER_S", 0.05)
    with progress.compiling("LongKernel", "sm_90a"):
        assert wait_for(lambda: stderr.getvalue() == "cutecall: compiling LongKernel "
                                                     "for sm_90a…")
    assert LINE.fullmatch(stderr.getvalue()) and not timers()


def test_under_a_bar_the_notice_is_the_bars_text(monkeypatch):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setattr(progress, "NOTICE_AFTER_S", 0.05)
    with progress.bar(2, "cutecall test", "item") as bar:
        with progress.compiling("LongKernel", "sm_90a"):
            assert wait_for(lambda: "compiling LongKernel for sm_90a…" in (bar.postfix or ""))
        assert bar.postfix == ""
        bar.update(2)
    out = stderr.getvalue()
    assert "cutecall: compiling" not in out and "cutecall test" in out and "2/2" in out


def test_without_tqdm_no_bar_and_the_work_goes_on(monkeypatch):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setitem(sys.modules, "tqdm", None)     # import tqdm raises
    with progress.bar(2, "cutecall test", "item") as bar:
        bar.update(2)
    assert stderr.getvalue() == ""


def quick():
    pass


def progress_in_worker():
    raise RuntimeError(f"progress shown: {progress.enabled()}")


def test_warmup_draws_a_bar_of_its_tasks_but_not_in_its_workers(monkeypatch):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setenv(progress.ENV, "1")
    report = cutecall.warmup([quick, quick, progress_in_worker], workers=2)
    out = stderr.getvalue()
    assert "cutecall warm-up" in out and "3/3" in out and "task" in out
    (failed,) = report.failed
    assert failed.error == "RuntimeError: progress shown: False"
    monkeypatch.setenv(progress.ENV, "0")
    stderr.truncate(0)
    cutecall.warmup([quick, quick], workers=2)
    assert stderr.getvalue() == ""


def test_autotune_draws_a_bar_of_its_candidates(monkeypatch, tmp_path):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setenv("CUTECALL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUTECALL_AUTOTUNE", raising=False)
    monkeypatch.delenv("CUTECALL_AUTOTUNE_CONFIG", raising=False)
    monkeypatch.setenv(progress.ENV, "1")

    def build(k):
        return lambda x: x * k

    tuned = cutecall.autotune(build, configs=[{"k": 1}, {"k": 2}, {"k": 3}],
                              key=lambda x: x.shape, name="progress_scale",
                              timer=lambda fn, args, warmup, rep: 10.0)
    tuned(jnp.ones(4))
    out = stderr.getvalue()
    assert "cutecall autotune 'progress_scale'" in out and "3/3" in out
    assert tuned.report(jnp.ones(4)).timing_runs == 6   # all tie: each timed twice


def test_log_lines_carry_a_timestamp(monkeypatch):
    stderr = on_terminal(monkeypatch)
    monkeypatch.setenv(log.ENV, "info")
    level = log.logger.level
    monkeypatch.setattr(log.logger, "_cutecall_env_handler", None, raising=False)
    log.configure_from_env()                   # a handler on the captured stderr
    try:
        log.logger.info("store miss: kernel '%s'", "stamped")
    finally:
        log.logger.removeHandler(log.logger._cutecall_env_handler)
        log.logger.setLevel(level)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} cutecall INFO: "
                        r"store miss: kernel 'stamped'\n", stderr.getvalue())


def corrupt(path: str, how: str) -> None:
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    if how == "empty":
        blob = bytearray()
    elif how == "magic":
        blob[0] ^= 1
    elif how == "manifest":
        blob[60] ^= 1
    else:                                      # the object cut short
        blob = blob[:-7]
    with open(path, "wb") as f:
        f.write(blob)


@pytest.mark.parametrize("how, fault", [
    ("empty", "truncated header (0 bytes)"), ("magic", "bad magic"),
    ("manifest", "manifest digest mismatch"), ("object", "object is ")])
def test_a_corrupt_entry_logs_a_warning_and_is_rebuilt(tmp_path, caplog, how, fault):
    store, key, stamp = ArtifactStore(str(tmp_path / "s")), "ab" * 32, {"v": 1}
    store.get_or_build(key, stamp, lambda: ({}, b"object" * 50))
    corrupt(store.path(key), how)
    caplog.set_level(logging.WARNING, logger="cutecall")
    entry, built = store.get_or_build(key, stamp, lambda: ({}, b"object" * 50))
    assert built and entry.data == b"object" * 50
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert message.startswith(f"corrupt store entry {store.path(key)} (key {key[:16]}): ")
    assert fault in message and message.endswith("; removed, and it is rebuilt")


def test_a_corrupt_kernel_entry_says_the_kernel_is_recompiled(caplog, compiles, tmp_path):
    lower_add(3000, "progress_corrupt")
    (path,) = (tmp_path / "cutecall-cache").glob("v1/entries/*.ck")
    corrupt(str(path), "manifest")
    cutecall.clear_cache()                     # in-process only: the store is read
    caplog.set_level(logging.INFO, logger="cutecall")
    lower_add(3000, "progress_corrupt")
    assert compiles() == 2
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert str(path) in warning and "manifest digest mismatch" in warning
    assert warning.endswith("removed, and kernel 'progress_corrupt' is recompiled")


# -- where people look: a fake clock, no compile, no waiting -----------------

def fake_clock(monkeypatch, *times):
    """progress reads these times, in order (seconds)."""
    ticks = iter(times)
    monkeypatch.setattr(progress, "clock", lambda: next(ticks))


def in_a_log(monkeypatch) -> io.StringIO:
    monkeypatch.delenv(progress.ENV, raising=False)
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


def test_in_a_log_a_long_compile_is_a_line_when_slow_and_one_when_done(monkeypatch):
    stream = in_a_log(monkeypatch)
    fake_clock(monkeypatch, 100.0, 112.3)      # the compile takes 12.3 s
    with progress.compiling("FlashFwd", "sm_90a"):
        pass
    assert stream.getvalue() == ("cutecall: compiling FlashFwd for sm_90a… (running for 2 s)\n"
                                 "cutecall: compiled FlashFwd for sm_90a in 12.3 s\n")
    assert not timers()


def test_in_a_log_a_failed_long_compile_says_after_how_long(monkeypatch):
    stream = in_a_log(monkeypatch)
    fake_clock(monkeypatch, 0.0, 5.0)
    with pytest.raises(ValueError), progress.compiling("Broken", "sm_100a"):
        raise ValueError("the DSL refused")
    assert stream.getvalue().splitlines()[-1] == \
        "cutecall: compiling Broken for sm_100a failed after 5.0 s"


def test_a_short_compile_is_silent_everywhere(monkeypatch):
    stream = in_a_log(monkeypatch)
    fake_clock(monkeypatch, 0.0, 1.9)
    with progress.compiling("Quick", "sm_90a"):
        pass
    assert stream.getvalue() == "" and not timers()


def test_on_a_terminal_the_line_is_ended_in_place(monkeypatch):
    stderr = on_terminal(monkeypatch)
    fake_clock(monkeypatch, 0.0, 12.3)
    with progress.compiling("FlashFwd", "sm_90a"):
        pass
    assert stderr.getvalue() == "cutecall: compiling FlashFwd for sm_90a… done (12.3 s)\n"


def test_in_a_log_a_bar_is_a_line_at_start_at_most_every_30_s_and_at_the_end(monkeypatch):
    stream = in_a_log(monkeypatch)
    fake_clock(monkeypatch, 0.0, 10.0, 40.0, 45.0, 80.5)
    with progress.bar(3, "cutecall warm-up", "task") as bar:
        bar.update()                           # 10 s: too soon for a line
        bar.update()                           # 40 s: a line
        bar.set_postfix_str("compiling FlashFwd for sm_90a…")
        bar.update()                           # 45 s: the last; the end says it
    assert stream.getvalue() == ("cutecall warm-up: 0/3 tasks\n"
                                 "cutecall warm-up: 2/3 tasks, 40 s\n"
                                 "cutecall warm-up: 3/3 tasks in 80.5 s\n")


def test_in_a_notebook_the_bar_is_tqdm_auto(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())   # a kernel's stream: no tty
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("zmqshell"))
    made = []

    class NotebookBar:                         # what tqdm.auto gives in Jupyter
        def __init__(self, **kwargs):
            made.append(kwargs)
            self.n = 0

        def update(self, n=1):
            self.n += n

        def close(self):
            made.append(("closed", self.n))

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = NotebookBar
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    assert progress.style() == progress.NOTEBOOK
    with progress.bar(2, "cutecall warm-up", "task") as bar:
        bar.update(2)
    assert made == [dict(total=2, desc="cutecall warm-up", unit="task", leave=True),
                    ("closed", 2)]
