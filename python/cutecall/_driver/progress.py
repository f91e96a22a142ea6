"""What cutecall shows on a terminal while something takes long: a bar over
warm-up tasks and autotuning candidates (:func:`bar`, drawn with ``tqdm``),
and one line for a single compile that runs past :data:`NOTICE_AFTER_S`
(:func:`compiling`)::

    cutecall: compiling FlashAttentionForwardSm90 for sm_90a… done (12.3 s)

Both go to stderr, and only when :func:`enabled` says so:
``CUTECALL_PROGRESS=1`` always, ``CUTECALL_PROGRESS=0`` never, unset: when
stderr is a terminal. Warm-up's worker processes run with
``CUTECALL_PROGRESS=0`` (their parent draws the bar). While a bar is drawn,
a slow compile shows in the bar's text instead of a line of its own. Nothing
here raises into the work it describes: a display that fails to write is
dropped. ``tqdm`` is imported only when a bar is drawn.
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
_ALWAYS = ("1", "true", "on", "yes")
_NEVER = ("0", "false", "off", "no")
_bars: list = []       # the bars drawn now, innermost last


def enabled(stream=None) -> bool:
    """Whether progress is shown on `stream` (default: ``sys.stderr``):
    ``$CUTECALL_PROGRESS`` if set (1 or 0), else whether it is a terminal."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in _ALWAYS:
        return True
    if value and value not in _NEVER:
        warnings.warn(f"cutecall: {ENV}={os.environ[ENV]!r}: use 1 (always) or 0 "
                      f"(never); shown on a terminal only", RuntimeWarning, stacklevel=2)
    elif value:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class _NoBar:
    """What :func:`bar` yields when nothing is drawn."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        pass

    def refresh(self) -> None:
        pass


@contextlib.contextmanager
def bar(total: int, desc: str, unit: str):
    """A ``tqdm`` bar of `total` `unit`s on stderr while the block runs
    (``.update(n)``, ``.set_postfix_str(text)``, ``.refresh()``: redraw, so
    the clock moves while nothing finishes); a no-op object when
    progress is off or tqdm is missing. Closed on exit, error or not."""
    stream = sys.stderr
    drawn = None
    if enabled(stream):
        try:
            from tqdm import tqdm
        except ImportError:  # a dependency; absent only in a --no-deps install
            tqdm = None
        if tqdm is not None:
            # a terminal that reports no size (a bare pty) gets 80 x 20:
            # tqdm would draw nothing there
            sized = _columns(stream) > 0
            drawn = tqdm(total=total, desc=desc, unit=unit, file=stream, disable=False,
                         dynamic_ncols=sized, ncols=None if sized else 80,
                         nrows=None if sized else 20, leave=True)
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
    if the block raises, `` failed``. A shorter block prints nothing. Under
    a :func:`bar` the notice is the bar's text instead. The timer thread is
    cancelled and joined before the block's outcome propagates."""
    stream = sys.stderr
    if not enabled(stream):
        yield
        return
    text = f"{verb} {name} for {arch}…"
    lock, state = threading.Lock(), {"shown": False, "over": False}
    start = time.perf_counter()

    def show():
        with lock:
            if state["over"] or state["shown"]:
                return
            state["shown"] = True
            if _bars:
                with contextlib.suppress(OSError, ValueError):
                    _bars[-1].set_postfix_str(text)
            else:
                _write(stream, f"cutecall: {text}")

    timer = threading.Timer(NOTICE_AFTER_S, show)
    timer.daemon = True
    timer.start()
    ending = " failed"
    try:
        yield
        ending = f" done ({time.perf_counter() - start:.1f} s)"
    finally:
        timer.cancel()
        if time.perf_counter() - start >= NOTICE_AFTER_S:
            show()  # a timer thread the GIL kept waiting: the line still shows
        with lock:
            state["over"] = True
            if state["shown"] and _bars:
                with contextlib.suppress(OSError, ValueError):
                    _bars[-1].set_postfix_str("")
            elif state["shown"]:
                _write(stream, ending + "\n")
        timer.join()
