"""The local tier's files: its errors, private directories (0700, refused if
others can write them) and per-key ``flock`` locks. A lock here is for one
host only: shared filesystems do not honour ``flock`` reliably, so nothing
in the remote tier (``file_backend``) relies on it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat


class CacheError(RuntimeError):
    """``cutecall.CacheError``: the artifact store's directory
    (``CUTECALL_CACHE_DIR``, default ``~/.cache/cutecall``) is unsafe to load
    machine code from: not a directory, owned by another user, or writable
    by group or others. The message names the path, what is wrong and the
    fix (``chmod 700``, another ``CUTECALL_CACHE_DIR``, or
    ``CUTECALL_CACHE=0``). Raised by the first compile that uses the store;
    a store that merely cannot be written (read-only, full) only warns.

    Example::

        import cutecall
        try:
            y = call(x)
        except cutecall.CacheError as e:
            print(e)      # cache directory /shared/c is writable by group ...
            raise
    """


class StoreUnavailable(CacheError, OSError):
    """The store's directory cannot be created (a read-only file system, no
    permission). An OSError too: the driver warns and uses the kernel it
    compiled without the store (docs/cache.md), where an unsafe directory
    (another owner, group-writable) stays a hard CacheError."""


def check_private_dir(path: str) -> None:
    """Creates `path` (mode 0700) if missing; raises CacheError if it is not
    a directory, belongs to another user, or group/others can write it."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise StoreUnavailable(f"cutecall: cannot create cache directory {path}: "
                               f"{e.strerror}") from e
    st = os.stat(path)
    fix = ("cutecall stores machine code there; use a private directory "
           "(chmod 700, or set CUTECALL_CACHE_DIR) or set CUTECALL_CACHE=0")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"cutecall: cache path {path} is not a directory")
    if st.st_uid != os.getuid():
        raise CacheError(f"cutecall: cache directory {path} is owned by uid "
                         f"{st.st_uid}, not by this user (uid {os.getuid()}); "
                         + fix)
    if st.st_mode & 0o022:
        raise CacheError(f"cutecall: cache directory {path} is writable by "
                         f"group or others (mode {oct(st.st_mode & 0o777)}); "
                         + fix)


@contextlib.contextmanager
def file_lock(path: str, blocking: bool = True):
    """Holds an exclusive flock on `path` (created 0600); yields False when
    `blocking` is False and another process holds it. Safe against the lock
    file being removed by its holder: the inode locked is the one at `path`."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            yield False
            return
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # removed or replaced while we waited: lock the new one
    try:
        yield True
    finally:
        os.close(fd)
