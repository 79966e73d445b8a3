"""Output files: every output appears whole or not at all, and only a regular file is replaced.

Every file the package writes goes through :func:`atomic_path` (or a ``write_*_atomic``
helper), and every output path a user names is checked first by :func:`check_writable`.
The rules, by what the destination is:

- **A regular file, or a new name:** the writer gets a temporary path in the destination's
  own folder (so the final rename stays on one filesystem and is atomic); the path is renamed
  over the destination only when the writer returned. The temporary name is hidden and ends
  in ``.tmp`` (``.results.json.1f3a9c2e.tmp``, the name cut short where it would pass the
  filesystem's NAME_MAX), so globs such as ``*.json`` never see a half-written file, even one
  left by a killed process. A writer that picks its format from the file name (matplotlib's
  ``savefig``) must be told the format explicitly.
- **A symbolic link** is followed: the file it points to is replaced, the link is kept.
- **A character device** (``/dev/null``, ``/dev/full``, a terminal) is written through: the
  writer writes a temporary file in the system's temporary folder, whose bytes are then copied
  into the device. The device is never renamed over nor removed, and no file is made beside it.
- **A FIFO, a socket, a block device or a folder** is refused with one line, before any work
  (:func:`check_writable`) and again just before the rename (it may have appeared meanwhile).
- **A regular file of another kind** (a grid TOML where a timeline goes) is kept: an output
  whose files all begin alike refuses, with :func:`check_replaceable`, a file that does not.
- **A name longer than the filesystem allows** (a name over NAME_MAX, a path over PATH_MAX) is
  refused by :func:`check_writable` by its length, before any call that would fail on it.

A destination that cannot be written raises :class:`moesim.errors.InputError` naming the path
and the cause, which the CLI prints on one line (exit 2): a missing or read-only folder, or a
write that fails for want of space or quota, on a read-only filesystem, for lack of
permission, on a name too long or on an I/O error (``ENOSPC``, ``EDQUOT``, ``EFBIG``,
``EROFS``, ``EACCES``, ``EPERM``, ``ENAMETOOLONG``, ``EIO``), whether it happens while the
temporary file is made, written, flushed or renamed (``out.json cannot be written: No space
left on device``). The temporary file is then removed and an old destination is left as it was.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from moesim.errors import InputError

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "write_json_atomic", "check_writable",
           "check_replaceable"]

_ATTEMPTS = 100
_NAME_MAX = 255                     # where the filesystem does not say
_PATH_MAX = 4096                    # Linux's, the terminating NUL included
#: what a writer's OSError may mean about the destination rather than about moesim
_USER_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.ENAMETOOLONG, errno.EIO, errno.ENOTDIR, errno.EISDIR})
_TEMP_EXTRA = len(".") + len(".12345678.tmp")
_RULE = "must be a regular file or a character device"
_CHUNK = 1 << 20


def _unwritable(path: Path, exc: OSError, via: str = "") -> InputError:
    return InputError(str(path), f"cannot be written{via}: {_cause(exc)}", show_value=False)


def _errno_of(exc: OSError) -> int | None:
    """The errno of ``exc``; pyarrow's IOError carries it only in its text (``[errno 28]``)."""
    if exc.errno is not None:
        return exc.errno
    found = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
    return int(found.group(1)) if found else None


def _cause(exc: OSError) -> str:
    code = _errno_of(exc)
    return exc.strerror or (os.strerror(code) if code is not None else str(exc))


def _is_user_errno(exc: OSError) -> bool:
    return _errno_of(exc) in _USER_ERRNOS


def _kind(mode: int) -> str | None:
    """What a file that may not be replaced nor written through is; None for a regular file
    or a character device."""
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "a special file"


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return _NAME_MAX


def _is_dir(path: Path) -> bool:
    """``Path.is_dir``, False (not an OSError) where the name is too long for the filesystem."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _stat(path: Path) -> os.stat_result | None:
    """``os.stat`` (links followed), or None when there is nothing there yet."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


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
        raise InputError(flag, f"cannot be written ({_cause(exc)})", str(path)) from None


def _check_writable(target: Path, flag: str, path: str) -> None:
    _check_name_length(target, flag)
    st = _stat(target)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(flag, "must name a file, not a folder", path)
    if st is not None and (kind := _kind(st.st_mode)) is not None:
        raise InputError(flag, f"{_RULE}, not {kind}", path)
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
    if len(raw) >= _PATH_MAX:
        raise InputError(flag, f"is a path of {len(raw):,} bytes, longer than the {_PATH_MAX - 1:,} the system "
                         "allows", str(path))
    longest = max(len(part) for part in raw.split(b"/")[:-1] or [b""])
    if longest > _NAME_MAX:
        raise InputError(flag, f"has a folder name of {longest} bytes, longer than the {_NAME_MAX} the filesystem "
                         "allows", str(path))


def _check_name_length(path: Path, flag: str, shown: str | None = None) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    limit = _name_max(folder) if _is_dir(folder) else _NAME_MAX
    size = len(os.fsencode(path.name))
    if size > limit:
        raise InputError(flag, f"has a file name of {size} bytes, longer than the {limit} the filesystem allows",
                         shown or str(path))


def _is_pseudo_fs(folder: Path) -> bool:
    """/proc and /sys accept no new files even for root, and /dev itself holds devices, not
    results (its subfolders, such as the tmpfs /dev/shm, are ordinary)."""
    resolved = folder.resolve()
    return resolved.parts[:2] in (("/", "proc"), ("/", "sys")) or resolved == Path("/dev")


def _temp_name(path: Path) -> str:
    """``.NAME.XXXXXXXX.tmp``, NAME cut (at a byte) where the whole would pass NAME_MAX."""
    room = _name_max(path.parent) - _TEMP_EXTRA
    name = os.fsencode(path.name)
    stem = os.fsdecode(name[:room]) if len(name) > room else path.name
    return f".{stem}.{secrets.token_hex(4)}.tmp"


def _create_temp(path: Path) -> Path:
    """A new empty hidden file beside ``path``, created exclusively (mode as for a new file,
    or the destination's mode when it exists)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:                 # a file where a folder should be
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent)) from None
    for _ in range(_ATTEMPTS):
        tmp = path.with_name(_temp_name(path))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        except FileNotFoundError:
            pass
        return tmp
    raise FileExistsError(f"no free temporary name beside {path} after {_ATTEMPTS} attempts")


def _refuse_kind(dest: Path, mode: int) -> None:
    kind = _kind(mode)
    if kind is not None:
        raise InputError(str(dest), f"{_RULE}, not {kind}", show_value=False)


@contextmanager
def atomic_path(path: str | Path, *, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path; when the block ends, rename it over ``path`` (a regular file
    or a new name) or copy its bytes into ``path`` (a character device). See the module's rules.

    With ``durable`` the temporary file is flushed to disk (fsync) before the rename, so a
    crash right after leaves the new content, not an empty file.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     out = Path(folder) / "a.txt"
    ...     with atomic_path(out) as tmp:
    ...         _ = tmp.write_text("hello")
    ...     print(out.read_text(), [p.name for p in out.parent.iterdir()])
    hello ['a.txt']
    """
    dest = Path(path)
    try:
        st = _stat(dest)
    except OSError as exc:
        raise _unwritable(dest, exc) from exc
    if st is not None and stat.S_ISCHR(st.st_mode):
        with _through_device(dest) as tmp:
            yield tmp
        return
    if st is not None:
        _refuse_kind(dest, st.st_mode)
    real = Path(os.path.realpath(dest)) if dest.is_symlink() else dest     # keep the link, replace its file
    try:
        tmp = _create_temp(real)
    except OSError as exc:
        raise _unwritable(dest, exc) from exc
    try:
        try:
            yield tmp
        except OSError as exc:
            if _is_user_errno(exc):
                raise _unwritable(dest, exc) from exc
            raise
        try:
            if durable:
                _fsync(tmp)
            _recheck(dest, real)
            os.replace(tmp, real)
        except OSError as exc:
            raise _unwritable(dest, exc) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _recheck(dest: Path, real: Path) -> None:
    """Just before the rename: nothing but a regular file (or a link, or nothing) is there."""
    try:
        mode = os.lstat(real).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISLNK(mode):
        _refuse_kind(dest, mode)
        if stat.S_ISCHR(mode):
            raise InputError(str(dest), "became a character device while the output was written; rerun",
                             show_value=False)


@contextmanager
def _through_device(dest: Path) -> Iterator[Path]:
    """A temporary file in the system's temporary folder, copied into the device ``dest``."""
    via = f" (through a temporary file in {tempfile.gettempdir()})"
    try:
        fd, name = tempfile.mkstemp(prefix=".moesim-", suffix=".tmp")
    except OSError as exc:
        raise _unwritable(dest, exc, via) from exc
    os.close(fd)
    tmp = Path(name)
    try:
        try:
            yield tmp
        except OSError as exc:
            if _is_user_errno(exc):
                raise _unwritable(dest, exc, via) from exc
            raise
        try:
            _copy_into_device(tmp, dest)
        except OSError as exc:
            raise _unwritable(dest, exc) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _copy_into_device(src: Path, dest: Path) -> None:
    """Write the bytes of ``src`` into the character device ``dest``: opened without creating,
    truncating or blocking (a FIFO put there meanwhile is not waited on), checked again once open."""
    fd = os.open(dest, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISCHR(mode):
            _refuse_kind(dest, mode)
            raise InputError(str(dest), "stopped being a character device while the output was written; rerun",
                             show_value=False)
        os.set_blocking(fd, True)
        with open(src, "rb") as source:
            while chunk := source.read(_CHUNK):
                view = memoryview(chunk)
                while view:
                    written = os.write(fd, view)
                    if written <= 0:
                        raise OSError(errno.EIO, os.strerror(errno.EIO), str(dest))
                    view = view[written:]
    finally:
        os.close(fd)


def write_text_atomic(text: str, path: str | Path, *, durable: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with atomic_path(path, durable=durable) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomic(data: bytes, path: str | Path, *, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_path(path, durable=durable) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_json_atomic(obj: Any, path: str | Path, *, durable: bool = False) -> Path:
    """Write ``obj`` as compact JSON with sorted keys (``{"a":1,"b":[2,3]}``) atomically."""
    return write_text_atomic(json.dumps(obj, sort_keys=True, separators=(",", ":")), path, durable=durable)
