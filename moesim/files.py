"""Atomic file writes: every output file appears whole or not at all.

A writer gets a temporary path in the destination's own folder (so the final rename stays
on one filesystem and is atomic), writes it, and the path is renamed over the destination
only when the writer returned; on any error the temporary file is removed and an existing
destination is left as it was. The temporary name is hidden and ends in ``.tmp``
(``.results.json.1f3a9c2e.tmp``), so globs such as ``*.json`` or ``*.toml`` never see a
half-written file, even one left by a killed process. A writer that picks its format from
the file name (matplotlib's ``savefig``) must be told the format explicitly.

A destination that cannot be written (a missing or read-only folder, a folder in the way)
raises :class:`moesim.errors.InputError` naming the path, which the CLI prints on one line.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from moesim.errors import InputError

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "write_json_atomic", "check_writable"]

_ATTEMPTS = 100


def _unwritable(path: Path, exc: OSError) -> InputError:
    return InputError(str(path), f"cannot be written: {exc.strerror or exc}", show_value=False)


def check_writable(path: str | Path, flag: str) -> None:
    """Refuse, before any work, an output path whose file could not be created: a missing or
    read-only folder, or a folder where the file should be (``flag`` names the option).

    >>> check_writable("/proc/x.json", "-o")
    Traceback (most recent call last):
    ...
    moesim.errors.InputError: -o must name a file in an existing, writable folder, got '/proc/x.json'
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise InputError(flag, "must name a file, not a folder", str(path))
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK) or (
            target.exists() and not os.access(target, os.W_OK)) or _is_pseudo_fs(parent):
        raise InputError(flag, "must name a file in an existing, writable folder", str(path))


def _is_pseudo_fs(folder: Path) -> bool:
    """/proc and /sys accept no new files even for root."""
    resolved = folder.resolve()
    return resolved.parts[:2] in (("/", "proc"), ("/", "sys"))


def _create_temp(path: Path) -> Path:
    """A new empty hidden file beside ``path``, created exclusively (mode as for a new file,
    or the destination's mode when it exists)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:                 # a file where a folder should be
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent)) from None
    for _ in range(_ATTEMPTS):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
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


@contextmanager
def atomic_path(path: str | Path, *, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` when the block ends.

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
        tmp = _create_temp(dest)
    except OSError as exc:
        raise _unwritable(dest, exc) from exc
    try:
        yield tmp
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        try:
            os.replace(tmp, dest)
        except OSError as exc:
            raise _unwritable(dest, exc) from exc
    finally:
        tmp.unlink(missing_ok=True)


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
