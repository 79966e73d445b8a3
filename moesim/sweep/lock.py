"""One writer per sweep output: ``<out>.lock`` beside the output, held for the whole sweep.

The lock is an exclusive, non-blocking ``flock`` on that file, so a second sweep on the same
output (a plain run or a ``--resume``) is refused at once, told which process holds it (the
holder writes its pid, host and start time into the file), and never runs a point. The
holder removes the file when it ends, while it still holds the lock; after a ``kill -9`` the
kernel releases the lock and the file left behind is harmless (the next sweep takes it).
A process that opened the file just before its holder removed it notices (the path no longer
names the file it locked) and opens the new one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from moesim.errors import InputError

__all__ = ["lock_path", "sweep_lock"]

_ATTEMPTS = 20


def lock_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".lock")


@contextmanager
def sweep_lock(out: str | Path) -> Iterator[Path]:
    """Hold the lock of the sweep output ``out`` for the block; refuse if another process holds it."""
    path = lock_path(out)
    fd = _acquire(path, Path(out))
    try:
        _describe(fd)
        yield path
    finally:
        try:
            path.unlink(missing_ok=True)        # still locked: no other sweep can be using this file
        except OSError:
            pass
        os.close(fd)


def _acquire(path: Path, out: Path) -> int:
    for _ in range(_ATTEMPTS):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)       # as the parts folder would be
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            cause = "a file is where its folder should be" if isinstance(exc, FileExistsError) else exc.strerror
            raise InputError("-o", f"cannot be locked for this sweep ({path}: {cause})", str(out)) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError("-o", f"cannot be locked for this sweep ({path} is not a regular file)", str(out))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InputError("-o", f"is being written by another moesim sweep ({_holder(fd)}, lock {path}); "
                                 "wait for it to finish, or stop it, and then run this one again", str(out)) from None
            if _names(path, fd):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)                            # its holder removed it after we opened it: take the new one
    raise InputError("-o", f"cannot be locked for this sweep ({path} keeps being replaced)", str(out))


def _names(path: Path, fd: int) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _describe(fd: int) -> None:
    """Write who holds the lock into it (best effort: the lock works without it)."""
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                       "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}) + "\n"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
    except OSError:
        pass


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {int(info['pid'])} on {info['host']}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet said who it is"
