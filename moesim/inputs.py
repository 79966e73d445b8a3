"""Input files: every file a user names is opened here, so that none can hang, exhaust memory
or overflow a parser.

The rules, by what the path is:

- **A regular file** (or a link to one) is read, up to the cap of its kind (:data:`MAX_BYTES`):
  a file over its cap is refused by its size before a byte is read, so a multi-GB file given
  by mistake never fills the memory.
- **A FIFO, a socket, a character or block device, a folder** is refused with one line:
  moesim reads no FIFO (it blocks until a writer comes, forever if none does) and no device
  (``/dev/zero`` and ``/dev/urandom`` never end). The path is opened with ``O_NONBLOCK`` (a
  FIFO opens at once, writer or not) and checked with ``fstat`` on the open descriptor, so a
  FIFO put in place between a check and the read is refused too.
- **A path that cannot be opened** (missing, unreadable, a name longer than the filesystem
  allows) is an :class:`~moesim.errors.InputError` naming the option, the cause and the path.
- **A parsed JSON or TOML document** nested deeper than :data:`MAX_DEPTH` levels is refused,
  and so is one too deep for the parser itself (``[[[[...]]]]`` 100,000 deep): every walk of
  the data after it (validation, comparison, printing) is then bounded too.

Readers that open a file themselves (pyarrow's Parquet reader, numpy's ``np.load``) take the
path after :func:`check_input` has said it is a regular file within its cap.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Literal

from moesim.errors import InputError
from moesim.typing_ import TOMLValue

__all__ = ["Kind", "MAX_BYTES", "MAX_DEPTH", "open_input", "read_input", "read_input_text", "check_input",
           "parse_json", "parse_toml", "check_depth", "is_dir", "exists", "is_regular"]

Kind = Literal["config", "result", "log", "trace", "table"]

_MiB = 1 << 20
#: the largest file of each kind moesim reads, and why that much
MAX_BYTES: dict[Kind, tuple[int, str]] = {
    # profiles, models, grids: the bundled ones are under 100 KiB; parsed TOML takes ~10x its text
    "config": (64 * _MiB, "a TOML configuration"),
    # a --json result, a sweep part or manifest: the largest moesim writes are a few MiB
    "result": (64 * _MiB, "a JSON result"),
    # measurement logs (llama-bench, fio, TTFT, draft routing) and third-party routing logs:
    # read whole and split into records, the largest known is ~30 MiB
    "log": (256 * _MiB, "a measurement log"),
    # canonical Parquet traces: read one row group at a time into arrays whose size the
    # reader checks against this machine's memory; the file itself is compressed
    "trace": (16 << 30, "a trace"),
    # a sweep's results (Parquet), read whole into a DataFrame: 10,000 points take a few MiB
    "table": (4 << 30, "a results table"),
}
#: the deepest nesting a JSON or TOML input may have: moesim's own files nest 8 levels at
#: most; 64 leaves room and keeps every later walk far below the interpreter's recursion limit
MAX_DEPTH = 64
_PATH_MAX = 4096        # Linux's, the terminating NUL included
_NAME_MAX = 255


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", _MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}" if n % size == 0 else f"{n / size:.1f} {unit}"
    return f"{n} B"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"


def _not_regular(path: str | Path, flag: str, mode: int) -> InputError:
    if stat.S_ISDIR(mode):
        return InputError(flag, "must be a file, not a folder", str(path))
    return InputError(flag, f"must be a regular file, not {_kind(mode)} (moesim reads no FIFO, socket or device: "
                      "one can block or never end)", str(path))


def _too_long(path: str | Path, flag: str) -> InputError:
    parts = os.fsencode(path).split(b"/")
    longest = max(parts, key=len)
    if len(longest) > _NAME_MAX:
        what = "file" if longest is parts[-1] else "folder"
        rule = f"has a {what} name of {len(longest)} bytes, longer than the {_NAME_MAX} the filesystem allows"
    else:
        rule = (f"is a path of {len(os.fsencode(path)):,} bytes, longer than the {_PATH_MAX - 1:,} the system "
                "allows")
    return InputError(flag, rule, str(path))


def _open_error(path: str | Path, flag: str, exc: OSError) -> InputError:
    code = exc.errno
    if code == errno.ENOENT:
        return InputError(flag, "must be an existing file", str(path))
    if code == errno.ENAMETOOLONG:
        return _too_long(path, flag)
    if code == errno.ENOTDIR:
        return InputError(flag, "must be an existing file (a part of its path is not a folder)", str(path))
    if code in (errno.EACCES, errno.EPERM):
        return InputError(flag, f"must be readable ({exc.strerror})", str(path))
    return InputError(flag, f"cannot be read ({exc.strerror or exc})", str(path))


def _too_big(path: str | Path, flag: str, kind: Kind, size: int) -> InputError:
    cap, what = MAX_BYTES[kind]
    return InputError(flag, f"is {_bytes(size)}, more than the {_bytes(cap)} {what} may have (is it the right "
                      "file?)", str(path))


def check_input(path: str | Path, flag: str, kind: Kind) -> os.stat_result:
    """Refuse ``path`` unless it is a regular file within the cap of ``kind``; return its stat.
    For readers that open the path themselves: :func:`open_input` also closes the race of a
    file replaced between the check and the read.

    >>> check_input("/dev/zero", "--trace", "trace")
    Traceback (most recent call last):
    ...
    moesim.errors.InputError: --trace must be a regular file, not a character device (moesim reads no FIFO, \
socket or device: one can block or never end), got '/dev/zero'
    """
    with open_input(path, flag, kind) as handle:
        return os.fstat(handle.fileno())


@contextmanager
def open_input(path: str | Path, flag: str, kind: Kind) -> Iterator[BinaryIO]:
    """``path`` opened for reading in binary, once it is known to be a regular file within the
    cap of ``kind`` (``flag`` names the option or field the path came from)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise _open_error(path, flag, exc) from None
    except ValueError:          # a NUL byte in the path
        raise InputError(flag, "must be a path without NUL characters", str(path)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, flag, st.st_mode)
        if st.st_size > MAX_BYTES[kind][0]:
            raise _too_big(path, flag, kind, st.st_size)
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def read_input(path: str | Path, flag: str, kind: Kind) -> bytes:
    """The bytes of the regular file ``path``, at most the cap of ``kind`` (a file that grew
    past it while read is refused too)."""
    cap = MAX_BYTES[kind][0]
    with open_input(path, flag, kind) as handle:
        try:
            data = handle.read(cap + 1)
        except OSError as exc:
            raise InputError(flag, f"cannot be read ({exc.strerror or exc})", str(path)) from None
    if len(data) > cap:
        raise _too_big(path, flag, kind, len(data))
    return data


def read_input_text(path: str | Path, flag: str, kind: Kind) -> str:
    """:func:`read_input` decoded as UTF-8; other bytes are an InputError naming the first."""
    data = read_input(path, flag, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(flag, f"must be UTF-8 text (byte {exc.start} is not)", str(path)) from None


def check_depth(obj: Any, flag: str, source: str | None = None) -> None:
    """Refuse data nested deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(flag, source)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _too_deep(flag: str, source: str | None) -> InputError:
    return InputError(flag, f"must nest at most {MAX_DEPTH} levels of arrays and tables (moesim's own files nest 8 "
                      "at most)", show_value=False, source=source)


def parse_json(data: bytes | str, flag: str, source: str | None = None, what: str = "JSON") -> Any:
    """``data`` parsed as JSON: malformed text, an integer of more than 4,300 digits, or nesting
    deeper than :data:`MAX_DEPTH` is an InputError (``what`` says what the file should be)."""
    try:
        obj = json.loads(data)
    except RecursionError:
        raise _too_deep(flag, source) from None
    except ValueError as exc:           # JSONDecodeError, bytes not UTF-8, an integer past the digit limit
        raise InputError(flag, f"must be {what} ({exc})", show_value=False, source=source) from None
    check_depth(obj, flag, source)
    return obj


def parse_toml(text: str, flag: str, source: str | None = None) -> dict[str, TOMLValue]:
    """``text`` parsed as TOML, with the nesting and number limits of :func:`parse_json`."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(flag, source) from None
    except ValueError as exc:           # TOMLDecodeError, or an integer past Python's digit limit
        raise InputError(flag, f"is malformed ({exc})", show_value=False, source=source) from None
    check_depth(data, flag, source)
    return data


def _stat_or_none(path: str | Path) -> os.stat_result | None:
    """``os.stat`` (links followed), or None where nothing can be there: missing, a name too
    long for the filesystem, a file where a folder should be, a loop of links."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def is_dir(path: str | Path) -> bool:
    """``Path.is_dir`` that is False, not an OSError, for a name the filesystem cannot hold."""
    st = _stat_or_none(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def is_regular(path: str | Path) -> bool:
    """``Path.is_file`` that is False, not an OSError, for a name the filesystem cannot hold."""
    st = _stat_or_none(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def exists(path: str | Path) -> bool:
    """``Path.exists`` that is False, not an OSError, for a name the filesystem cannot hold."""
    return _stat_or_none(path) is not None
