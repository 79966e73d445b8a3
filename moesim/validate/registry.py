"""The registry of validation cases behind ``moesim validate``.

A case compares one prediction with one reference figure it was (or was not) fitted to,
under a stated tolerance. Cases are grouped by name prefix (``estream/``, ``host/``,
``hexagon/``, ``specdecode/``, ``decode/``, ``devices/``, ``cpu-moe/``; :mod:`moesim.validate.cases` lists them).

Each case records the status it is expected to have (``expect``), with the case, so that
the record cannot drift from the definition: ``"pass"``; ``"miss"``, a known, explained
miss of a figure (``why`` says why and where the docs explain it); or ``"varies"``, a
measurement timed on this machine whose result depends on its load (``why`` says so).
A result's :attr:`CaseResult.status` compares the outcome with that record.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypedDict

from moesim.errors import MoesimError, ToolMissingError
from moesim.typing_ import JSONValue

__all__ = ["Case", "CaseResult", "Expect", "Expectation", "Status", "evaluate", "iter_results", "run_cases", "group_of"]

#: what a case is recorded to do: pass, miss its figure (known and explained), or either (timed here)
Expect = Literal["pass", "miss", "varies"]
#: a result against its record; "regression" and "error" make ``moesim validate`` exit 1
Status = Literal["pass", "now passes", "known miss", "regression", "error", "skipped"]


class Expectation(TypedDict, total=False):
    """A case's ``expect`` and ``why`` where they are not a plain pass (``Case(..., **expectation)``)."""

    expect: Expect
    why: str


@dataclass(frozen=True, kw_only=True)
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
    expect: Expect = "pass"
    why: str = ""            # one line: why it misses (or varies) and where the docs explain it

    def __post_init__(self) -> None:
        if self.expect not in ("pass", "miss", "varies"):
            raise ValueError(f"{self.name}: expect must be pass, miss or varies, got {self.expect!r}")
        if self.expect != "pass" and not self.why.strip():
            raise ValueError(f"{self.name}: a case expected to {self.expect} needs its reason (why)")


@dataclass(frozen=True, kw_only=True)
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
    expect: Expect = "pass"
    why: str = ""
    failure: str = ""        # the error the case raised ("" = it gave a value or was skipped)

    @property
    def status(self) -> Status:
        if self.skipped:
            return "skipped"
        if self.failure:
            return "error"
        if self.passed:
            return "now passes" if self.expect == "miss" else "pass"
        return "regression" if self.expect == "pass" else "known miss"

    @property
    def reference_text(self) -> str:
        if self.tolerance_kind == "range":
            return f"{self.low:.4g}-{self.high:.4g}"
        return f"{self.reference:.4g}"

    def to_dict(self) -> dict[str, JSONValue]:
        ref: dict[str, JSONValue] = {"value": self.reference, "source": self.source}
        if self.tolerance_kind == "range":
            ref.update({"low": self.low, "high": self.high})
        return {"name": self.name, "reference": ref,
                "predicted": self.predicted, "error": self.error, "tolerance": self.tolerance,
                "tolerance_kind": self.tolerance_kind, "passed": self.passed, "fitted_to": self.fitted_to,
                "unit": self.unit, "skipped": self.skipped or None, "expect": self.expect, "why": self.why or None,
                "status": self.status, "failure": self.failure or None}


def group_of(name: str) -> str:
    """A case's group: its name up to the first slash, with the slash ("estream/")."""
    return name.split("/", 1)[0] + "/"


def _result(case: Case, predicted: float, **kw: Any) -> CaseResult:
    return CaseResult(name=case.name, reference=case.reference, source=case.source, predicted=predicted,
                      error=kw.pop("error", 0.0), tolerance=case.tolerance, tolerance_kind=case.tolerance_kind,
                      passed=kw.pop("passed", False), fitted_to=case.fitted_to, unit=case.unit, low=case.low,
                      high=case.high, expect=case.expect, why=case.why, **kw)


def evaluate(case: Case) -> CaseResult:
    """Run one case: its result, a skip (a tool missing here) or its error; never raises."""
    try:
        if case.reference_fn is not None:
            case = replace(case, reference=case.reference_fn())
        predicted = case.predict()
    except ToolMissingError as exc:     # cannot run here: a skip with its reason, never a pass
        return _result(case, float("nan"), skipped=str(exc))
    except MoesimError as exc:          # a missing measurement, a bad file: this case errs, the others run
        return _result(case, float("nan"), failure=str(exc))
    except Exception as exc:  # noqa: BLE001 -- a bug in one case is reported as its error, the run goes on
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return _result(case, float("nan"), failure=f"internal error: {type(exc).__name__}: {exc} "
                                                   f"(at {Path(frame.filename).name}:{frame.lineno})")
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
    return _result(case, predicted, error=error, passed=passed)


def iter_results(cases: Iterable[Case]) -> Iterator[CaseResult]:
    """Run the cases one at a time, in order, yielding each result as it comes."""
    for case in cases:
        yield evaluate(case)


def run_cases(cases: list[Case], only: str | None = None) -> list[CaseResult]:
    return list(iter_results(c for c in cases if not only or only in c.name))
