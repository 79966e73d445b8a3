"""Checks of an output path before any work: :func:`check_writable` (the folder, the kind of file,
the name's length) and :func:`check_replaceable` (an existing file of another kind is kept)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from moesim.errors import InputError
from moesim.files.fs import NAME_MAX, PATH_MAX, RULE, cause, is_dir, kind_of, name_max, stat_or_none

__all__ = ["check_writable", "check_replaceable"]


def check_writable(path: str | Path, flag: str) -> None:
    """Refuse, before any work, an output path that could not be written: a missing or
    read-only folder, a folder, FIFO, socket or block device where the file should be, or a
    name longer than the filesystem allows (``flag`` names the option).

    >>> check_writable("/proc/x.json", "-o")
    Traceback (most recent call last):
    ...
    moesim.errors.InputError: -o must name a file in an existing, writable folder, got '/proc/x.json'
    """
    target = Path(path)
    _check_path_length(target, flag)
    try:
        _check_writable(target, flag, str(path))
    except OSError as exc:          # a loop of links, a file where a folder should be, a path too long
        if exc.errno == errno.ENOTDIR:
            raise InputError(flag, "must name a file in an existing, writable folder", str(path)) from None
        raise InputError(flag, f"cannot be written ({cause(exc)})", str(path)) from None


def _check_writable(target: Path, flag: str, path: str) -> None:
    _check_name_length(target, flag)
    st = stat_or_none(target)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(flag, "must name a file, not a folder", path)
    if st is not None and (kind := kind_of(st.st_mode)) is not None:
        raise InputError(flag, f"{RULE}, not {kind}", path)
    if st is not None and stat.S_ISCHR(st.st_mode):         # written through: its folder does not matter
        if not os.access(target, os.W_OK):
            raise InputError(flag, "names a device that cannot be written", path)
        return
    real = Path(os.path.realpath(target)) if target.is_symlink() else target
    _check_name_length(real, flag, path)
    parent = real.parent if str(real.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK) or (
            st is not None and not os.access(target, os.W_OK)) or _is_pseudo_fs(parent):
        raise InputError(flag, "must name a file in an existing, writable folder", path)


def check_replaceable(path: str | Path, flag: str, signature: bytes, what: str) -> None:
    """Refuse an existing regular file at ``path`` that does not begin with ``signature`` (how
    every file moesim writes there begins): an output option never replaces a file of another
    kind named by mistake (a grid, a profile), as ``sweep -o`` keeps another grid's results and
    ``calibrate device --out`` an existing profile. A new name, an empty file and a character
    device (written through, never replaced) pass; a file that cannot be read is refused,
    since what it holds cannot be known.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     grid = Path(folder) / "grid.toml"
    ...     _ = grid.write_text("[axes]")
    ...     check_replaceable(grid, "--timeline", b'{"displayTimeUnit"', "a moesim timeline")
    Traceback (most recent call last):
    ...
    moesim.errors.InputError: --timeline names an existing file that is not a moesim timeline; it is not replaced \
(delete it or choose another name), got '...grid.toml'
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        return
    except PermissionError:
        raise InputError(flag, f"names an existing file that cannot be read, so it is not known to be {what}; it "
                         "is not replaced", str(path)) from None
    except OSError:             # not a place for a file at all: check_writable and the writer say why
        return
    try:
        st = os.fstat(fd)
        head = os.read(fd, len(signature)) if stat.S_ISREG(st.st_mode) and st.st_size else signature
    finally:
        os.close(fd)
    if head != signature:
        raise InputError(flag, f"names an existing file that is not {what}; it is not replaced (delete it or "
                         "choose another name)", str(path))


def _check_path_length(path: Path, flag: str) -> None:
    """Every name in ``path`` within NAME_MAX (the last one is checked against its folder's own
    limit by :func:`_check_name_length`), the whole within PATH_MAX."""
    raw = os.fsencode(path)
    if len(raw) >= PATH_MAX:
        raise InputError(flag, f"is a path of {len(raw):,} bytes, longer than the {PATH_MAX - 1:,} the system "
                         "allows", str(path))
    longest = max(len(part) for part in raw.split(b"/")[:-1] or [b""])
    if longest > NAME_MAX:
        raise InputError(flag, f"has a folder name of {longest} bytes, longer than the {NAME_MAX} the filesystem "
                         "allows", str(path))


def _check_name_length(path: Path, flag: str, shown: str | None = None) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    limit = name_max(folder) if is_dir(folder) else NAME_MAX
    size = len(os.fsencode(path.name))
    if size > limit:
        raise InputError(flag, f"has a file name of {size} bytes, longer than the {limit} the filesystem allows",
                         shown or str(path))


def _is_pseudo_fs(folder: Path) -> bool:
    """/proc and /sys accept no new files even for root, and /dev itself holds devices, not
    results (its subfolders, such as the tmpfs /dev/shm, are ordinary)."""
    resolved = folder.resolve()
    return resolved.parts[:2] in (("/", "proc"), ("/", "sys")) or resolved == Path("/dev")
