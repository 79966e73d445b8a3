"""What several validation scripts share: the page they write, a count option's check and the
gpt-oss-120b prologue.

Imported by its folder name (``python validation/x.py`` puts validation/ first on the path).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from moesim.files import write_text_atomic
from moesim.traces.sources import default_trace

HERE = Path(__file__).resolve().parent


def write_page(lines: list[str], name: str) -> None:
    """Write ``lines`` as validation/``name`` (atomically, one trailing newline) and print them."""
    write_text_atomic("\n".join(lines) + "\n", HERE / name)
    print("\n".join(lines))


def count(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse names the option and exits 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def passes_args(doc: str, argv: list[str] | None) -> argparse.Namespace | None:
    """Parse ``--passes`` (default 2); None, after saying so, when the real gpt-oss-120b trace is absent."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--passes", type=count, default=2)
    args = ap.parse_args(argv)
    if default_trace("gpt-oss-120b") is None:
        print("the real gpt-oss-120b trace (../shared/traces) is required")
        return None
    return args
