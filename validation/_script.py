"""What several validation scripts share: the page they write and the gpt-oss-120b prologue.

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


def passes_args(doc: str, argv: list[str] | None) -> argparse.Namespace | None:
    """Parse ``--passes`` (default 2); None, after saying so, when the real gpt-oss-120b trace is absent."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args(argv)
    if default_trace("gpt-oss-120b") is None:
        print("the real gpt-oss-120b trace (../shared/traces) is required")
        return None
    return args
