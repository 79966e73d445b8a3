"""Atomic writes: :func:`atomic_path` and the ``write_*_atomic`` helpers (the rules are in
:mod:`moesim.files`)."""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from moesim.errors import InputError
from moesim.files.fs import RULE, is_user_errno, kind_of, name_max, stat_or_none, unwritable

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "write_json_atomic"]

_ATTEMPTS = 100
_TEMP_EXTRA = len(".") + len(".12345678.tmp")
_CHUNK = 1 << 20


def _temp_name(path: Path) -> str:
    """``.NAME.XXXXXXXX.tmp``, NAME cut (at a byte) where the whole would pass NAME_MAX."""
    room = name_max(path.parent) - _TEMP_EXTRA
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
    kind = kind_of(mode)
    if kind is not None:
        raise InputError(str(dest), f"{RULE}, not {kind}", show_value=False)


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
        st = stat_or_none(dest)
    except OSError as exc:
        raise unwritable(dest, exc) from exc
    if st is not None and stat.S_ISCHR(st.st_mode):
        with _through_device(dest) as tmp:
            yield tmp
        return
    if st is not None:
        _refuse_kind(dest, st.st_mode)
    with _beside(dest, durable) as tmp:
        yield tmp


@contextmanager
def _writer_errors(dest: Path, via: str = "") -> Iterator[None]:
    """A writer's OSError that is about the destination (no space, read-only, ...) as the
    one-line refusal of ``dest``; any other error as it is."""
    try:
        yield
    except OSError as exc:
        if is_user_errno(exc):
            raise unwritable(dest, exc, via) from exc
        raise


@contextmanager
def _beside(dest: Path, durable: bool) -> Iterator[Path]:
    """A temporary file beside ``dest`` (beside the file a link points to: the link is kept),
    renamed over it when the writer returns; removed in every case."""
    real = Path(os.path.realpath(dest)) if dest.is_symlink() else dest     # keep the link, replace its file
    try:
        tmp = _create_temp(real)
    except OSError as exc:
        raise unwritable(dest, exc) from exc
    try:
        with _writer_errors(dest):
            yield tmp
        try:
            if durable:
                _fsync(tmp)
            _recheck(dest, real)
            os.replace(tmp, real)
        except OSError as exc:
            raise unwritable(dest, exc) from exc
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
        raise unwritable(dest, exc, via) from exc
    os.close(fd)
    tmp = Path(name)
    try:
        with _writer_errors(dest, via):
            yield tmp
        try:
            _copy_into_device(tmp, dest)
        except OSError as exc:
            raise unwritable(dest, exc) from exc
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
