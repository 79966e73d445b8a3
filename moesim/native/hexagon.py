"""Driver of the native Hexagon reference (``native_ref/hexagon``, docs/hexagon.md).

Builds the integer HVX kernels with Debian's clang-19/lld-19 (``make``), runs them under
``qemu-hexagon -cpu v67`` with and without the packet-counting plugin, writes their inputs,
reads their outputs and compares both the HVX and the scalar result with numpy, byte for
byte. Measurement side only: nothing in the simulator imports this module.

A kernel *case* is one kernel at one shape with seeded inputs: :func:`make_case` builds
the request and the numpy reference, :func:`run_case` runs it and returns a
:class:`CaseRun` (pass/fail of each comparison and, with the plugin, packets per function).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from moesim.errors import MoesimError, ToolMissingError
from moesim.native._build import build_lock
from moesim.native.hexagon_cases import (
    HEADER_B,
    KERNELS,
    MAGIC,
    KernelCase,
    fixed_point_scales,
    make_case,
    parse_shape,
    quantize_q4_0,
    tile_q4_x32,
    tile_x32,
)

__all__ = ["HexagonToolchainError", "HexagonRunError", "Toolchain", "toolchain", "source_dir", "build",
           "KERNELS", "KernelCase", "CaseRun", "FunctionCount", "parse_shape", "make_case", "run_case",
           "quantize_q4_0", "fixed_point_scales", "tile_q4_x32", "tile_x32"]

#: tool (Makefile variable) -> default command; the environment may override each one.
TOOLS = {"CLANG": "clang-19", "LLD": "ld.lld-19", "OBJDUMP": "llvm-objdump-19", "LLVM_MC": "llvm-mc-19",
         "NM": "llvm-nm-19", "HOSTCC": "gcc", "MAKE": "make", "QEMU_HEXAGON": "qemu-hexagon"}
_INSTALL = "apt-get install clang-19 lld-19 llvm-19 qemu-user gcc make"
_RUN_TIMEOUT_S = 300.0


class HexagonToolchainError(MoesimError):
    """The cross toolchain or the emulator is missing, or the build failed (one line)."""


class HexagonToolMissing(HexagonToolchainError, ToolMissingError):
    """A tool of the cross toolchain or the emulator is not on PATH, or the sources are absent."""


class HexagonRunError(MoesimError):
    """A kernel program failed under qemu-hexagon (one line)."""


@dataclass(frozen=True)
class Toolchain:
    """Resolved tool paths, in the order of :data:`TOOLS`."""

    paths: tuple[tuple[str, str], ...]

    def __getitem__(self, tool: str) -> str:
        return dict(self.paths)[tool]

    def versions(self) -> dict[str, str]:
        """First line of ``--version`` of the compiler, linker, disassembler, emulator, gcc."""
        out = {}
        for tool in ("CLANG", "LLD", "OBJDUMP", "HOSTCC", "QEMU_HEXAGON"):
            proc = subprocess.run([self[tool], "--version"], capture_output=True, text=True, check=False)
            lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
            out[TOOLS[tool]] = next((ln for ln in lines if "version" in ln.lower()), lines[0] if lines else "?")
        return out


def source_dir() -> Path:
    """``<repo>/native_ref/hexagon`` (a source checkout; not part of the installed wheel)."""
    return Path(__file__).resolve().parents[2] / "native_ref" / "hexagon"


def toolchain() -> Toolchain:
    """Find every tool, or raise one line naming the missing ones and how to install them."""
    paths = {tool: shutil.which(os.environ.get(tool, default)) for tool, default in TOOLS.items()}
    missing = [os.environ.get(t, d) for t, d in TOOLS.items() if paths[t] is None]
    if missing:
        raise HexagonToolMissing(f"the Hexagon reference needs {', '.join(missing)} on PATH ({_INSTALL})")
    if not (source_dir() / "Makefile").is_file():
        raise HexagonToolMissing(f"native Hexagon sources not found at {source_dir()} (needs a source checkout)")
    return Toolchain(tuple((t, str(p)) for t, p in paths.items()))


def build(tc: Toolchain, *, jobs: int = 2) -> Path:
    """``make`` the kernels, the wrong variant and the plugin (no-op when up to date)."""
    env = {**os.environ, **{t: p for t, p in tc.paths if t not in ("MAKE", "QEMU_HEXAGON", "NM")},
           "PYTHON": sys.executable}
    with build_lock(source_dir()):
        proc = subprocess.run([tc["MAKE"], "-C", str(source_dir()), f"-j{max(1, jobs)}", "--no-print-directory"],
                              capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "error" in ln.lower() or "check_isa" in ln), lines[-1] if lines else "")
        raise HexagonToolchainError(f"make -C native_ref/hexagon failed: {detail}")
    return source_dir() / "build"


@dataclass(frozen=True)
class FunctionCount:
    packets: int          # executed packets in the function
    hvx_packets: int      # of which contain at least one HVX instruction


@dataclass(frozen=True, kw_only=True)
class CaseRun:
    case: KernelCase
    hvx_matches_numpy: bool
    scalar_matches_numpy: bool
    program_mismatch_B: int                  # bytes where the program's HVX and scalar outputs differ
    counts: dict[str, FunctionCount] | None  # function -> count (with the plugin only)

    @property
    def ok(self) -> bool:
        return self.hvx_matches_numpy and self.scalar_matches_numpy and self.program_mismatch_B == 0


@cache
def _symbols(nm: str, elf: str, mtime: float) -> dict[str, tuple[int, int]]:
    out = subprocess.run([nm, "-S", "--defined-only", elf], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.split("\n"):
        parts = line.split()
        if len(parts) == 4 and parts[2] in "Tt":
            syms[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return syms


def _count_functions(tc: Toolchain, elf: Path, counts_file: Path, functions: list[str]) -> dict[str, FunctionCount]:
    syms = _symbols(tc["NM"], str(elf), elf.stat().st_mtime)
    if missing := [f for f in functions if f not in syms]:
        raise HexagonRunError(f"{elf.name}: no symbol {missing[0]} (rebuild native_ref/hexagon)")
    text = counts_file.read_text()
    if "OVERFLOW" in text.split("\n", 1)[0]:
        raise HexagonRunError(f"{elf.name}: packet_count plugin table overflowed")
    rows = np.array([[int(a, 16), int(c), int(h)] for a, c, _, h in (ln.split() for ln in text.splitlines()[1:])],
                    dtype=np.int64).reshape(-1, 3)
    result = {}
    for fn in functions:
        lo, size = syms[fn]
        inside = rows[(rows[:, 0] >= lo) & (rows[:, 0] < lo + size)]
        result[fn] = FunctionCount(int(inside[:, 1].sum()), int(inside[:, 1][inside[:, 2] == 1].sum()))
    return result


def run_case(tc: Toolchain, build_dir: Path, case: KernelCase, *, count_packets: bool = False,
             program: str | None = None) -> CaseRun:
    """Run ``case`` under qemu-hexagon (with the plugin when ``count_packets``) and compare.

    ``program`` runs another build of the same kernel (the tests use ``q4_dequant_i8_wrong``).
    """
    elf = build_dir / f"{program or case.program}.elf"
    if not elf.is_file():
        raise HexagonRunError(f"{elf} not built (run moesim.native.hexagon.build first)")
    with tempfile.TemporaryDirectory(prefix="moesim-hvx-") as tmp:
        counts_file = Path(tmp) / "packets.txt"
        cmd = [tc["QEMU_HEXAGON"], "-cpu", "v67"]
        if count_packets:
            cmd += ["-plugin", f"{build_dir / 'packet_count.so'},out={counts_file}"]
        try:
            proc = subprocess.run([*cmd, str(elf)], input=case.request(), capture_output=True,
                                  timeout=_RUN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise HexagonRunError(f"{elf.name} {case.shape}: no result within {_RUN_TIMEOUT_S:.0f} s") from None
        err = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.strip()]
        if proc.returncode != 0:
            raise HexagonRunError(f"{elf.name} {case.shape}: {err[-1] if err else f'exit status {proc.returncode}'}")
        counts = None
        if count_packets:
            if not counts_file.is_file():
                raise HexagonRunError("qemu-hexagon did not load the packet plugin "
                                      f"({err[-1] if err else 'no output'}); "
                                      "it needs the dynamically linked qemu-user, not qemu-user-static")
            fns = [f for _, hvx, scalar in KERNELS[case.program][2] for f in (hvx, scalar)]
            counts = _count_functions(tc, elf, counts_file, fns)
    magic, status, mismatches, out_B = struct.unpack_from("<4I", proc.stdout)
    body = proc.stdout[HEADER_B:]
    if magic != MAGIC or status != 0 or len(body) != 2 * out_B:
        raise HexagonRunError(f"{elf.name} {case.shape}: malformed reply (status {status}, {len(body)} bytes)")
    return CaseRun(case=case, hvx_matches_numpy=body[:out_B] == case.expected,
                   scalar_matches_numpy=body[out_B:] == case.expected, program_mismatch_B=mismatches, counts=counts)

