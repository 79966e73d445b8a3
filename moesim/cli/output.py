"""Rendering for the CLI: stable JSON and plain-text tables (no terminal-width wrapping)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import click

from moesim.errors import InputError
from moesim.files import check_replaceable, check_writable, write_json_atomic
from moesim.typing_ import JSONValue

__all__ = ["emit_json", "json_clean", "render_table", "emit_table", "fmt_num", "writable_path", "timeline_path",
           "write_timeline", "TIMELINE_SIGNATURE", "describe_routing", "parse_int_list"]


def json_clean(obj: Any) -> Any:
    """``obj`` as ``emit_json`` prints it: string keys, lists for tuples, NaN/inf as None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_clean(v) for v in obj]
    return obj


def emit_json(obj: Any) -> None:
    """Print ``obj`` as JSON: sorted keys, two-space indent, NaN/inf as null."""
    click.echo(json.dumps(json_clean(obj), indent=2, sort_keys=True, allow_nan=False))


def fmt_num(value: float | int | None, digits: int = 3) -> str:
    """Human number: thousands separators for ints, ``digits`` significant-ish decimals."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-align text, right-align numbers; columns separated by two spaces."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(_is_num(r[i]) for r in rows) and bool(rows) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [c.rjust(w) if numeric[i] and n else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_num(value: Any) -> bool:
    if isinstance(value, (int, float)):
        return True
    text = str(value).replace(",", "").replace("%", "")
    try:
        float(text)
    except ValueError:
        return text == "-"
    return True


def emit_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    click.echo(render_table(headers, rows))


def writable_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback: refuse an output path that cannot be written, before any work starts."""
    if value is not None:
        check_writable(value, _flag(param))
    return value


def _flag(param: click.Parameter) -> str:
    return param.opts[0] if param.opts else str(param.name)


#: how every timeline begins: ``results.chrome_trace``'s object as :func:`write_json_atomic`
#: writes it (sorted keys, no spaces); an existing file that begins otherwise is not replaced
TIMELINE_SIGNATURE = b'{"displayTimeUnit":"ms","traceEvents":['
_TIMELINE = "a moesim timeline (Chrome trace-event JSON)"


def timeline_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback of ``--timeline``: :func:`writable_path`, and an existing file is replaced
    only when it is a timeline (or empty): a grid or a profile named by mistake is kept."""
    if value is not None:
        check_writable(value, _flag(param))
        check_replaceable(value, _flag(param), TIMELINE_SIGNATURE, _TIMELINE)
    return value


def write_timeline(trace: Mapping[str, JSONValue], path: str, flag: str = "--timeline") -> None:
    """Write a Chrome trace (``result.to_chrome_trace()``) to ``path`` atomically, checking
    again that whatever is there now (the run took a while) may be replaced."""
    check_replaceable(path, flag, TIMELINE_SIGNATURE, _TIMELINE)
    write_json_atomic(trace, path)


def describe_routing(trace: dict[str, Any]) -> str:
    """One line: where the routing came from, real or synthetic (said once), and how it was
    assembled to the run's length (``repeated`` when the trace had to be cycled).

    >>> describe_routing({"source": "t.jsonl", "synthetic": False, "tokens": 1024, "assembly": {
    ...     "repeated": True, "pieces": [{"segment": 0, "start": 0, "stop": 512}, {"segment": 0, "start": 0,
    ...     "stop": 512}]}})
    'routing: real trace t.jsonl; its 512 tokens repeated to 1,024 (2.0x)'
    """
    source = re.sub(r"\s*\(synthetic: (true|false)\)", "", str(trace["source"]))
    line = f"routing: {'synthetic' if trace.get('synthetic') else 'real'} trace {source}"
    assembly = trace.get("assembly") or {}
    if assembly.get("repeated"):
        covered: dict[Any, set[int]] = {}
        for piece in assembly.get("pieces", []):
            covered.setdefault(piece["segment"], set()).update(range(piece["start"], piece["stop"]))
        unique = sum(len(v) for v in covered.values())
        n = int(trace.get("tokens") or assembly.get("n_tokens") or 0)
        if unique and n:
            line += f"; its {unique:,} tokens repeated to {n:,} ({n / unique:.1f}x)"
    return line


def parse_int_list(text: str, flag: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; anything else (empty, an empty element, non-integers, values
    < 1, a value twice) is an InputError naming ``flag``.

    >>> parse_int_list("256, 1024", "--tokens")
    [256, 1024]
    >>> parse_int_list("256,,4096", "--tokens")
    Traceback (most recent call last):
    moesim.errors.InputError: --tokens must be comma-separated integers >= 1 (element 2 is empty), got '256,,4096'
    """
    items = [x.strip() for x in text.split(",")]
    for i, item in enumerate(items):
        if not item and len(items) > 1:
            raise InputError(flag, f"must be comma-separated integers >= 1 (element {i + 1} is empty)", text)
    try:
        values = [int(x) for x in items if x]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise InputError(flag, "must be comma-separated integers >= 1", text)
    dup = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if dup is not None:
        raise InputError(flag, f"must not list a value twice ({dup} would run twice)", text)
    return values
