"""What the filesystem says about a destination: the cause of an OSError, what kind of file is
there, how long a name may be; and the one-line refusal of a destination that cannot be written."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from moesim.errors import InputError

__all__ = ["NAME_MAX", "PATH_MAX", "RULE", "unwritable", "cause", "is_user_errno", "kind_of", "name_max", "is_dir",
           "stat_or_none"]

NAME_MAX = 255                      # where the filesystem does not say
PATH_MAX = 4096                     # Linux's, the terminating NUL included
#: what a writer's OSError may mean about the destination rather than about moesim
_USER_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.ENAMETOOLONG, errno.EIO, errno.ENOTDIR, errno.EISDIR})
RULE = "must be a regular file or a character device"


def unwritable(path: Path, exc: OSError, via: str = "") -> InputError:
    return InputError(str(path), f"cannot be written{via}: {cause(exc)}", show_value=False)


def _errno_of(exc: OSError) -> int | None:
    """The errno of ``exc``; pyarrow's IOError carries it only in its text (``[errno 28]``)."""
    if exc.errno is not None:
        return exc.errno
    found = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
    return int(found.group(1)) if found else None


def cause(exc: OSError) -> str:
    code = _errno_of(exc)
    return exc.strerror or (os.strerror(code) if code is not None else str(exc))


def is_user_errno(exc: OSError) -> bool:
    return _errno_of(exc) in _USER_ERRNOS


def kind_of(mode: int) -> str | None:
    """What a file that may not be replaced nor written through is; None for a regular file
    or a character device."""
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "a special file"


def name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX


def is_dir(path: Path) -> bool:
    """``Path.is_dir``, False (not an OSError) where the name is too long for the filesystem."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def stat_or_none(path: Path) -> os.stat_result | None:
    """``os.stat`` (links followed), or None when there is nothing there yet."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
