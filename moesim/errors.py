"""Exception types with one-line messages that name the field, the rule and the value.

Every input problem a user can cause (a malformed profile, trace or configuration)
raises :class:`InputError`; the CLI prints ``str(err)`` on one line and exits with
status 2. Internal invariants use ``assert``; they are bugs, not input errors.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MoesimError", "InputError", "NotFittedError", "ToolMissingError", "StdoutError", "format_value"]


def format_value(value: Any, limit: int = 240) -> str:
    """Render a value for an error message: ``repr`` for strings, cut to ``limit`` chars
    (long enough for a deep file path, short enough that junk input stays one line)."""
    text = repr(value) if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class MoesimError(Exception):
    """Base class of every error moesim raises on purpose."""


class InputError(MoesimError, ValueError):
    """Bad user input: names where it came from, the field, the rule and the value.

    >>> e = InputError("ufs.read_bw_GBps", "must be > 0", -1.0, source="my.toml")
    >>> str(e), str(type(e)(*e.args)) == str(e)
    ('my.toml: ufs.read_bw_GBps must be > 0, got -1.0', True)
    """

    def __init__(
        self,
        field: str,
        rule: str,
        value: Any = None,
        source: str | None = None,
        show_value: bool = True,
    ) -> None:
        self.field = field
        self.rule = rule
        self.value = value
        self.source = source
        self.show_value = show_value
        message = f"{field} {rule}" if rule else field
        if show_value:
            message += f", got {format_value(value)}"
        if source:
            message = f"{source}: {message}"
        # args are the constructor's, so that type(e)(*e.args) rebuilds the same error (SimPy re-raises an
        # exception from a process that way)
        super().__init__(field, rule, value, source, show_value)
        self.message = message

    def __str__(self) -> str:
        return self.message


    def renamed(self, field: str) -> InputError:
        """The same error, naming ``field`` (the option a user typed for this run field)."""
        return InputError(field, self.rule, self.value, source=self.source, show_value=self.show_value)


class NotFittedError(MoesimError):
    """A profile number is marked ``fitted`` but has no value yet.

    Raised when a computation needs a number that has not been fitted: moesim never
    substitutes a silent default for an unknown.
    """

    def __init__(self, profile: str, field: str) -> None:
        self.profile = profile
        self.field = field
        super().__init__(
            f"{profile}: {field} is marked 'fitted' and has no value yet; "
            "calibrate the profile or set the value with its provenance"
        )


class ToolMissingError(MoesimError):
    """A tool a measurement needs (a compiler, make, the Hexagon toolchain, the emulator) is
    not installed here, or the sources it builds are absent: the measurement cannot run on
    this machine, which ``moesim validate`` reports as a skip with this message."""


class StdoutError(MoesimError):
    """Standard output cannot be written: it is closed, the disk or device behind it is full
    (``ENOSPC``), or the reader of its pipe went away (``EPIPE``, ``moesim ... | head``).

    Not an ``OSError`` on purpose: no handler meant for a file (nor click's own, which turns
    ``EPIPE`` into exit status 1) takes it for another; the CLI exits 141 for ``EPIPE``, as a
    shell reports SIGPIPE, and 2 with this one line otherwise.

    >>> import errno, os
    >>> str(StdoutError(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    'cannot write to standard output: No space left on device'
    """

    def __init__(self, cause: OSError | str) -> None:
        self.errno = cause.errno if isinstance(cause, OSError) else None
        reason = cause if isinstance(cause, str) else cause.strerror or str(cause)
        super().__init__(f"cannot write to standard output: {reason}")


_DEPRECATIONS_SHOWN: set[str] = set()


def deprecations_shown() -> set[str]:
    """The deprecations said so far (the CLI clears it for each command it runs)."""
    return _DEPRECATIONS_SHOWN


def deprecated(old: str, new: str) -> None:
    """Say once per process, on one stderr line, that ``old`` (a CLI option, a field or a value a
    saved file may still use) still works for this release and that ``new`` replaces it."""
    if old in _DEPRECATIONS_SHOWN:
        return
    _DEPRECATIONS_SHOWN.add(old)
    sys.stderr.write(f"moesim: {old} is deprecated; use {new} (the old spelling is removed in the next release)\n")
