"""Where the native CPU reference lives, how it is built, and how its programs are run.

The sources are in ``native_ref/cpu`` next to the ``moesim`` package (the repository
root); ``make`` builds them into ``native_ref/cpu/build``. Nothing here is imported by the
simulator: calibration code calls these helpers to measure, the simulator only reads the
resulting CSV files.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from moesim.errors import MoesimError, ToolMissingError

__all__ = ["NativeBuildError", "NativeToolMissing", "NativeRunError", "repo_root", "native_dir", "build", "build_lock",
           "run_tool"]


class NativeBuildError(MoesimError):
    """The native reference could not be built (no compiler, no make, or a compile error)."""


class NativeToolMissing(NativeBuildError, ToolMissingError):
    """No compiler, no make, or no sources: the reference cannot be built on this machine."""


class NativeRunError(MoesimError):
    """A native program exited with an error; the message is its last line of stderr."""


def repo_root() -> Path:
    """The repository root: the folder above the ``moesim`` package."""
    return Path(__file__).resolve().parent.parent.parent


def native_dir() -> Path:
    """The native CPU reference's sources: ``<repo>/native_ref/cpu``."""
    return repo_root() / "native_ref" / "cpu"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@contextmanager
def build_lock(src: Path) -> Iterator[None]:
    """One ``make`` of ``src`` at a time across processes (two pytest-xdist workers, two
    calibrations started together): concurrent makes of one tree compile the same objects
    and one may run a binary the other is still linking. An advisory lock on
    ``src/build/.lock``, released when the process ends however it ends."""
    (src / "build").mkdir(exist_ok=True)
    with open(src / "build" / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(*, jobs: int = 2) -> Path:
    """Build ``native_ref/cpu`` with ``make`` (a no-op when up to date); return the build dir.

    Raises :class:`NativeBuildError` with one line when make or the C compiler is missing or
    the build fails.
    """
    src = native_dir()
    if not (src / "Makefile").is_file():
        raise NativeToolMissing(f"native CPU reference not found: {src / 'Makefile'} is missing")
    make = shutil.which("make")
    if make is None:
        raise NativeToolMissing("building native_ref/cpu needs 'make', which is not on PATH")
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise NativeToolMissing(f"building native_ref/cpu needs a C11 compiler: {cc!r} is not on PATH "
                               "(install gcc or clang, or set CC)")
    with build_lock(src):
        proc = subprocess.run([make, "-C", str(src), f"-j{max(1, jobs)}", "--no-print-directory"],
                              capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        detail = errors[0].strip() if errors else _last_line(proc.stderr) or f"exit status {proc.returncode}"
        raise NativeBuildError(f"make -C native_ref/cpu failed: {detail}")
    return src / "build"


def run_tool(args: Sequence[str], *, timeout_s: float | None = None) -> str:
    """Run a native program; return its stdout, or raise :class:`NativeRunError`."""
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as err:
        raise NativeRunError(f"{Path(args[0]).name} {args[1]}: no result within {timeout_s} s") from err
    if proc.returncode != 0:
        detail = _last_line(proc.stderr) or f"exit status {proc.returncode}"
        raise NativeRunError(f"{Path(args[0]).name} {args[1]}: {detail}")
    return proc.stdout
