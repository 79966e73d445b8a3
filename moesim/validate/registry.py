"""The registry of validation cases behind ``moesim validate``.

The cases themselves are registered in :mod:`moesim.validate.estream`. A case compares one prediction with one
reference figure it was (or was not) fitted to,
under a stated tolerance. Cases are grouped by name prefix: ``estream/`` (published
EStream figures), later ``host/``, ``hexagon/``, ``specdecode/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from moesim.errors import ToolMissingError

__all__ = ["Case", "CaseResult", "run_cases", "render_markdown"]


@dataclass(frozen=True)
class Case:
    name: str
    reference: float
    source: str
    tolerance: float
    tolerance_kind: Literal["relative", "absolute", "range"]
    predict: Callable[[], float]
    fitted_to: bool          # True when the reference was a calibration target (fit quality)
    unit: str = ""
    low: float = 0.0         # "range" cases pass when low <= predicted <= high
    high: float = 0.0
    reference_fn: Callable[[], float] | None = None   # a measured reference, read when the case runs


@dataclass(frozen=True)
class CaseResult:
    name: str
    reference: float
    source: str
    predicted: float
    error: float             # relative (predicted / reference - 1) or absolute (predicted - reference)
    tolerance: float
    tolerance_kind: str
    passed: bool
    fitted_to: bool
    unit: str
    low: float = 0.0
    high: float = 0.0
    skipped: str = ""        # why the case could not run on this machine ("" = it ran)

    @property
    def reference_text(self) -> str:
        if self.tolerance_kind == "range":
            return f"{self.low:.4g}-{self.high:.4g}"
        return f"{self.reference:.4g}"

    def to_dict(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"value": self.reference, "source": self.source}
        if self.tolerance_kind == "range":
            ref.update({"low": self.low, "high": self.high})
        return {"name": self.name, "reference": ref,
                "predicted": self.predicted, "error": self.error, "tolerance": self.tolerance,
                "tolerance_kind": self.tolerance_kind, "passed": self.passed, "fitted_to": self.fitted_to,
                "unit": self.unit, "skipped": self.skipped or None}


def run_cases(cases: list[Case], only: str | None = None) -> list[CaseResult]:
    results = []
    for case in cases:
        if only and only not in case.name:
            continue
        try:
            if case.reference_fn is not None:
                case = replace(case, reference=case.reference_fn())
            predicted = case.predict()
        except ToolMissingError as exc:     # cannot run here: a skip with its reason, never a pass
            results.append(CaseResult(case.name, case.reference, case.source, float("nan"), 0.0, case.tolerance,
                                      case.tolerance_kind, False, case.fitted_to, case.unit, case.low, case.high,
                                      skipped=str(exc)))
            continue
        if case.tolerance_kind == "relative":
            error = predicted / case.reference - 1.0
            passed = abs(error) <= case.tolerance
        elif case.tolerance_kind == "absolute":
            error = predicted - case.reference
            passed = abs(error) <= case.tolerance
        else:   # distance outside the published range, relative to its nearer end
            error = 0.0 if case.low <= predicted <= case.high else (
                predicted / case.high - 1.0 if predicted > case.high else predicted / case.low - 1.0)
            passed = error == 0.0
        results.append(CaseResult(case.name, case.reference, case.source, predicted, error, case.tolerance,
                                  case.tolerance_kind, passed, case.fitted_to, case.unit, case.low, case.high))
    return results


def render_markdown(results: list[CaseResult]) -> str:
    lines = ["# Validation", "",
             "Written by `moesim validate` (full run). Each case compares a prediction with a published or",
             "measured figure. `fitted` marks figures the profile was calibrated to (they show fit quality,",
             "not predictive accuracy); the others were held out.", "",
             "| case | reference | predicted | error | tolerance | fitted | passed | source |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.skipped:
            lines.append(f"| `{r.name}` | {r.reference_text} {r.unit} | skipped | | | {'yes' if r.fitted_to else 'no'} "
                         f"| skipped: {r.skipped} | {r.source} |")
            continue
        err = f"{r.error:+.1%}" if r.tolerance_kind == "relative" else f"{r.error:+.4f}"
        tol = {"relative": f"±{r.tolerance:.0%}", "absolute": f"±{r.tolerance:.4f}"}.get(r.tolerance_kind, "in range")
        err = f"{r.error:+.1%} outside" if r.tolerance_kind == "range" and r.error else err
        lines.append(f"| `{r.name}` | {r.reference_text} {r.unit} | {r.predicted:.4g} {r.unit} | {err} | {tol} | "
                     f"{'yes' if r.fitted_to else 'no'} | {'yes' if r.passed else '**no**'} | {r.source} |")
    passed, skipped = sum(r.passed for r in results), sum(bool(r.skipped) for r in results)
    lines += ["", f"{passed} of {len(results) - skipped} cases that ran pass"
              + (f"; {skipped} could not run on this machine." if skipped else ".")]
    return "\n".join(lines) + "\n"
