"""What cutecall shows while something takes long: a bar over warm-up tasks
and autotuning candidates (:func:`bar`), and a notice for a single compile
that runs past :data:`NOTICE_AFTER_S` (:func:`compiling`), where people
look (:func:`style`):

* a **terminal**: a live ``tqdm`` bar; one line per slow compile, ended in
  place: ``cutecall: compiling FlashAttentionForwardSm90 for sm_90a… done
  (12.3 s)``;
* a **notebook** (a Jupyter kernel): ``tqdm.auto``'s bar (a widget where
  ipywidgets is installed), the compile line as on a terminal;
* anything else -- **CI logs**, a file, a pipe: whole lines, as a log
  reads them: ``cutecall: compiling K for sm_90a… (running for 2 s)`` then
  ``cutecall: compiled K for sm_90a in 12.3 s``; a bar is a line when it
  starts, at most one per :data:`LOG_EVERY_S`, and one when it ends.

All go to stderr. ``CUTECALL_PROGRESS=0`` shows nothing, ``=1`` (the
default) shows it in the style of the stream. Warm-up's worker processes
run with ``CUTECALL_PROGRESS=0`` (their parent draws the bar). While a bar
is drawn, a slow compile shows in the bar's text instead of a line of its
own. Nothing here raises into the work it describes: a display that fails
to write is dropped. ``tqdm`` is imported only when a bar is drawn.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
import warnings

ENV = "CUTECALL_PROGRESS"
NOTICE_AFTER_S = 2.0   # a compile longer than this gets its line (tests patch it)
LOG_EVERY_S = 30.0     # a bar's lines in a log: at most one per this many seconds
clock = time.perf_counter  # what progress measures time by (tests patch it)
_ALWAYS = ("1", "true", "on", "yes")
_NEVER = ("0", "false", "off", "no")
_bars: list = []       # the bars drawn now, innermost last
TERMINAL, NOTEBOOK, LOG = "terminal", "notebook", "log"


def style(stream=None) -> str | None:
    """How progress shows on `stream` (default ``sys.stderr``): None when
    ``$CUTECALL_PROGRESS`` is 0, else :data:`TERMINAL` (a terminal),
    :data:`NOTEBOOK` (a Jupyter kernel's stream) or :data:`LOG` (whole
    lines: CI logs, files, pipes)."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in _NEVER and value:
        return None
    if value and value not in _ALWAYS:
        warnings.warn(f"cutecall: {ENV}={os.environ[ENV]!r}: use 1 (show) or 0 "
                      f"(never); shown", RuntimeWarning, stacklevel=2)
    stream = sys.stderr if stream is None else stream
    try:
        if stream.isatty():
            return TERMINAL
    except (AttributeError, ValueError):  # no isatty, or closed
        pass
    return NOTEBOOK if "ipykernel.zmqshell" in sys.modules else LOG


def enabled(stream=None) -> bool:
    """Whether progress is shown at all (:func:`style` is not None)."""
    return style(stream) is not None


class _NoBar:
    """What :func:`bar` yields when nothing is drawn."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


class LogBar(_NoBar):
    """A bar as a log shows it: whole lines -- when it starts, at most one
    per :data:`LOG_EVERY_S` as work finishes, and when it ends (with the
    time it took)."""

    def __init__(self, total: int, desc: str, unit: str, stream):
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.n, self.postfix = 0, ""
        self.start = self.last = clock()
        self._line(f"0/{total} {unit}s")

    def _line(self, text: str) -> None:
        extra = f" ({self.postfix})" if self.postfix else ""
        _write(self.stream, f"{self.desc}: {text}{extra}\n")

    def update(self, n: int = 1) -> None:
        self.n += n
        now = clock()
        if now - self.last >= LOG_EVERY_S and self.n < self.total:
            self.last = now
            self._line(f"{self.n}/{self.total} {self.unit}s, {now - self.start:.0f} s")

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = text

    def close(self) -> None:
        self.postfix = ""
        self._line(f"{self.n}/{self.total} {self.unit}s in {clock() - self.start:.1f} s")


def _tqdm_bar(total: int, desc: str, unit: str, stream, kind: str):
    """A tqdm bar on `stream` (terminal) or tqdm.auto's (notebook); None
    without tqdm (a dependency; absent only in a --no-deps install)."""
    try:
        if kind == NOTEBOOK:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
    except ImportError:
        return None
    if kind == NOTEBOOK:
        return tqdm(total=total, desc=desc, unit=unit, leave=True)
    # a terminal that reports no size (a bare pty) gets 80 x 20: tqdm would
    # draw nothing there
    sized = _columns(stream) > 0
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=False,
                dynamic_ncols=sized, ncols=None if sized else 80,
                nrows=None if sized else 20, leave=True)


@contextlib.contextmanager
def bar(total: int, desc: str, unit: str):
    """A bar of `total` `unit`s on stderr while the block runs
    (``.update(n)``, ``.set_postfix_str(text)``, ``.refresh()``: redraw, so
    the clock moves while nothing finishes), drawn in the stream's
    :func:`style`; a no-op object when progress is off (or, on a terminal
    or in a notebook, tqdm is missing). Closed on exit, error or not."""
    stream = sys.stderr
    kind = style(stream)
    drawn = None
    if kind == LOG:
        drawn = LogBar(total, desc, unit, stream)
    elif kind is not None:
        drawn = _tqdm_bar(total, desc, unit, stream, kind)
    if drawn is None:
        yield _NoBar()
        return
    _bars.append(drawn)
    try:
        yield drawn
    finally:
        _bars.remove(drawn)
        with contextlib.suppress(OSError, ValueError):
            drawn.close()


def _columns(stream) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0


def _write(stream, text: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stream.write(text)
        stream.flush()


@contextlib.contextmanager
def compiling(name: str, arch: str, verb: str = "compiling"):
    """Shows ``cutecall: compiling NAME for ARCH…`` (`verb`: ``tracing``
    for a trace alone) on stderr once the block
    has run :data:`NOTICE_AFTER_S` seconds, ended by `` done (12.3 s)`` or,
    if the block raises, `` failed`` (in a log: whole lines, ``compiled
    NAME for ARCH in 12.3 s`` or ``... failed after 12.3 s``). A shorter
    block prints nothing. Under a :func:`bar` the notice is the bar's text
    instead. The timer thread is cancelled and joined before the block's
    outcome propagates."""
    stream = sys.stderr
    kind = style(stream)
    if kind is None:
        yield
        return
    text = f"{verb} {name} for {arch}…"
    lock, state = threading.Lock(), {"shown": False, "over": False}
    start = clock()

    def show():
        with lock:
            if state["over"] or state["shown"]:
                return
            state["shown"] = True
            if _bars:
                with contextlib.suppress(OSError, ValueError):
                    _bars[-1].set_postfix_str(text)
            elif kind == LOG:
                _write(stream, f"cutecall: {text} (running for {NOTICE_AFTER_S:.0f} s)\n")
            else:
                _write(stream, f"cutecall: {text}")

    timer = threading.Timer(NOTICE_AFTER_S, show)
    timer.daemon = True
    timer.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        timer.cancel()
        seconds = clock() - start
        if seconds >= NOTICE_AFTER_S:
            show()  # a timer thread the GIL kept waiting: the line still shows
        with lock:
            state["over"] = True
            if state["shown"] and _bars:
                with contextlib.suppress(OSError, ValueError):
                    _bars[-1].set_postfix_str("")
            elif state["shown"]:
                _write(stream, _ending(kind, name, arch, ok, seconds))
        timer.join()


def _ending(kind: str, name: str, arch: str, ok: bool, seconds: float) -> str:
    if kind != LOG:
        return f" done ({seconds:.1f} s)\n" if ok else " failed\n"
    if ok:
        return f"cutecall: compiled {name} for {arch} in {seconds:.1f} s\n"
    return f"cutecall: compiling {name} for {arch} failed after {seconds:.1f} s\n"
