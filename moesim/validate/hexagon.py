"""Validation cases of the native Hexagon reference: names start with ``hexagon/``.

``moesim validate --only hexagon/`` rebuilds native_ref/hexagon, runs every kernel of
:data:`moesim.calibrate.hvx.PLAN` under qemu-hexagon with the packet-counting plugin and
checks (docs/hexagon.md):

- ``hexagon/<kernel>/bitexact``: number of shapes where the HVX or the scalar output
  differs from numpy's on the same inputs, or from each other (must be 0);
- ``hexagon/packets/<kernel>/<shape>``: the committed packet model
  (moesim/cost/hvx_packets.toml) divided by the packets measured now, on every shape held
  out of the fit (within 5 %);
- ``hexagon/isa-check-refuses-newer-hvx`` and ``hexagon/wrong-kernel-caught``: the two
  guards can fail (a qfloat/HVX v69 probe is refused at build time; a kernel with swapped
  nibbles is reported as differing from numpy).

Without the toolchain (clang-19, lld-19, llvm-19, qemu-user, gcc, make) every case is
reported as skipped, with one line naming what is missing and how to install it (never as
passed); ``moesim validate --strict`` makes such a skip an error.
"""

from __future__ import annotations

import subprocess
from functools import cache, partial
from pathlib import Path

from moesim.calibrate.hvx import HELD_OUT_TOLERANCE, PLAN
from moesim.cost.hvx import MODEL_PATH, predict_packets
from moesim.native.hexagon import KERNELS, Toolchain, build, make_case, parse_shape, run_case, source_dir, toolchain
from moesim.validate.registry import Case

__all__ = ["hexagon_cases"]

_NUMPY = "numpy on the same seeded inputs (moesim.native.hexagon.make_case)"
_MEASURED = (f"packets counted now under qemu-hexagon; {MODEL_PATH.name} was fitted to other shapes "
             "(validation/hexagon_packets.csv)")


@cache
def _session() -> tuple[Toolchain, Path]:
    tc = toolchain()
    return tc, build(tc)


@cache
def _packets(program: str, shape: str) -> dict[str, int]:
    """Runs one kernel case with the plugin; CSV row -> packets, or -1 when outputs differ."""
    tc, build_dir = _session()
    run = run_case(tc, build_dir, make_case(program, shape), count_packets=True)
    assert run.counts is not None
    return {row: (run.counts[hvx].packets if run.ok else -1) for row, hvx, _ in KERNELS[program][2]}


def _differing_shapes(program: str) -> float:
    fit_shapes, held = PLAN[program]
    return float(sum(-1 in _packets(program, s).values() for s in (*fit_shapes, *held)))


def _model_over_measured(program: str, row: str, shape: str) -> float:
    measured = _packets(program, shape)[row]
    if measured < 0:
        return float("nan")     # a wrong kernel's packets are not compared
    return predict_packets(row, parse_shape(program, shape)) / measured


def _isa_check_refuses() -> float:
    """1.0 when ``make isa-selftest`` saw the forbidden probe refused."""
    tc, _ = _session()
    proc = subprocess.run([tc["MAKE"], "-C", str(source_dir()), "--no-print-directory", "isa-selftest"],
                          capture_output=True, text=True, check=False)
    return 1.0 if proc.returncode == 0 and "were refused" in proc.stdout else 0.0


def _wrong_kernel_caught() -> float:
    """1.0 when the deliberately wrong dequantisation kernel is reported as differing."""
    tc, build_dir = _session()
    run = run_case(tc, build_dir, make_case("q4_dequant_i8", "nb=64"), program="q4_dequant_i8_wrong")
    return 1.0 if not run.hvx_matches_numpy and run.scalar_matches_numpy and run.program_mismatch_B > 0 else 0.0


def hexagon_cases() -> list[Case]:
    """Every ``hexagon/`` case, in a stable order; nothing runs until a case's predict()."""
    cases = [Case(name=f"hexagon/{program}/bitexact", reference=0.0, source=_NUMPY, tolerance=0.0,
                  tolerance_kind="absolute", predict=partial(_differing_shapes, program), fitted_to=False,
                  unit="shapes differing")
             for program in PLAN]
    for program, (_, held) in PLAN.items():
        for row, _, _ in KERNELS[program][2]:
            cases += [Case(name=f"hexagon/packets/{row}/{shape}", reference=1.0, source=_MEASURED,
                           tolerance=HELD_OUT_TOLERANCE, tolerance_kind="relative",
                           predict=partial(_model_over_measured, program, row, shape), fitted_to=False,
                           unit="model/measured") for shape in held]
    cases.append(Case(name="hexagon/isa-check-refuses-newer-hvx", reference=1.0,
                      source="native_ref/hexagon make isa-selftest: a qfloat and an HVX v69 probe must be refused",
                      tolerance=0.0, tolerance_kind="absolute", predict=_isa_check_refuses, fitted_to=False,
                      unit="refused"))
    cases.append(Case(name="hexagon/wrong-kernel-caught", reference=1.0,
                      source="q4_dequant_i8 built with MOESIM_INJECT_BUG (nibbles swapped) must differ from numpy",
                      tolerance=0.0, tolerance_kind="absolute", predict=_wrong_kernel_caught, fitted_to=False,
                      unit="caught"))
    return cases
