"""What ``moesim validate`` says about its results: a line per case group, the summary,
the exit status and the Markdown report (docs/validation.md, written only when asked)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from moesim.validate.registry import CaseResult

__all__ = ["counts", "group_line", "summary_line", "summary_dict", "exit_status", "render_markdown", "status_text"]


def counts(results: list[CaseResult]) -> Counter[str]:
    return Counter(r.status for r in results)


def _parts(c: Counter[str]) -> list[str]:
    parts = [f"{c['pass'] + c['now passes']} pass"]
    for status, one, many in (("known miss", "known miss", "known misses"), ("regression", "regression", "regressions"),
                              ("error", "error", "errors"), ("skipped", "skipped", "skipped"),
                              ("now passes", "now passing (update its status)", "now passing (update their status)")):
        if c[status]:
            parts.append(f"{c[status]} {one if c[status] == 1 else many}")
    return parts


def group_line(group: str, results: list[CaseResult], seconds: float) -> str:
    """"estream/: 12 cases, 9 pass, 3 known misses (4.2 s)"."""
    return f"{group}: {len(results)} cases, {', '.join(_parts(counts(results)))} ({seconds:.1f} s)"


def summary_line(results: list[CaseResult]) -> str:
    """"N passed, N failed (K known, R regressions), N skipped" (and the errors, when any)."""
    c = counts(results)
    failed = c["known miss"] + c["regression"]
    line = (f"{c['pass'] + c['now passes']} passed, {failed} failed ({c['known miss']} known, "
            f"{c['regression']} regressions), {c['skipped']} skipped")
    return line + (f", {c['error']} errors" if c["error"] else "")


def summary_dict(results: list[CaseResult]) -> dict[str, object]:
    """The summary for ``--json``: the counts, the cases that now pass, and the summary line."""
    c = counts(results)
    return {"passed": c["pass"] + c["now passes"], "failed": c["known miss"] + c["regression"],
            "known_misses": c["known miss"], "regressions": c["regression"], "errors": c["error"],
            "skipped": c["skipped"], "now_passes": [r.name for r in results if r.status == "now passes"],
            "line": summary_line(results)}


def exit_status(results: list[CaseResult], strict: bool) -> int:
    """0 when every result is what its case records; 1 on a regression or an error, and with
    ``strict`` on any failure or skip (a known miss that now passes is listed, not failed)."""
    c = counts(results)
    if c["regression"] or c["error"]:
        return 1
    if strict and (c["known miss"] or c["skipped"]):
        return 1
    return 0


def status_text(r: CaseResult) -> str:
    """The result column: pass, known miss with its reason, REGRESSION, ..."""
    if r.status == "known miss":
        return f"known miss: {r.why}"
    if r.status == "now passes":
        return f"now passes: update its status (recorded as a known miss: {r.why})"
    if r.status == "regression":
        return "REGRESSION: recorded to pass"
    if r.status == "error":
        return f"ERROR: {r.failure}"
    if r.status == "skipped":
        return f"skipped: {r.skipped}"
    return "pass"


def _error_text(r: CaseResult) -> str:
    if r.tolerance_kind == "range" and r.error:
        return f"{r.error:+.1%} outside"
    return f"{r.error:+.1%}" if r.tolerance_kind == "relative" else f"{r.error:+.4f}"


def render_markdown(results: list[CaseResult], only: str | None = None) -> str:
    lines = ["# Validation", "",
             f"Written by `moesim validate{f' --only {only}' if only else ''} --write-docs docs/validation.md`. "
             "Each case compares a prediction with a published or",
             "measured figure. `fitted` marks figures the profile was calibrated to (they show fit quality,",
             "not predictive accuracy); the others were held out. Each case records its expected status",
             "with its definition (`moesim/validate/*.py`): a *known miss* is a figure the model misses for",
             "a reason explained in the page it names; a *regression* is a case recorded to pass that",
             "fails. `moesim validate` exits 0 when every result is what its case records.", "",
             "| case | reference | predicted | error | tolerance | fitted | status | source |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        fitted = "yes" if r.fitted_to else "no"
        status = status_text(r).replace("|", "/")
        if r.skipped or r.failure:
            lines.append(f"| `{r.name}` | {r.reference_text} {r.unit} | - | | | {fitted} | {status} | {r.source} |")
            continue
        tol = {"relative": f"±{r.tolerance:.0%}", "absolute": f"±{r.tolerance:.4f}"}.get(r.tolerance_kind, "in range")
        shown = status if r.status == "pass" else f"**{status}**"
        lines.append(f"| `{r.name}` | {r.reference_text} {r.unit} | {r.predicted:.4g} {r.unit} | {_error_text(r)} "
                     f"| {tol} | {fitted} | {shown} | {r.source} |")
    lines += ["", summary_line(results) + ".", *_campaign_totals()]
    return "\n".join(lines) + "\n"


#: the adversarial input campaign's report, in a source checkout (validation/input_campaign.py writes it)
CAMPAIGN_REPORT = Path(__file__).resolve().parents[2] / "validation" / "input_campaign.md"


def _table_at(lines: list[str], start: int) -> list[str]:
    """The Markdown table that begins at or after ``lines[start]``."""
    while start < len(lines) and not lines[start].startswith("|"):
        start += 1
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def _campaign_totals() -> list[str]:
    """The input campaign's totals per class and per section, from its last report (none outside a
    source checkout): bad inputs are validated too, by what each command did with them."""
    if not CAMPAIGN_REPORT.is_file():
        return []
    text = CAMPAIGN_REPORT.read_text(encoding="utf-8").splitlines()
    if "## Per section" not in text or len(text) < 3:
        return []
    return ["", "## Bad inputs: the adversarial input campaign", "",
            f"{text[2]} The cases and every outcome outside the two clean classes are in "
            "`validation/input_campaign.md`; `tests/unit/test_input_campaign.py` (slow) reruns the class "
            "sections and fails on any case outside them.", "",
            *_table_at(text, 0), "", *_table_at(text, text.index("## Per section"))]
