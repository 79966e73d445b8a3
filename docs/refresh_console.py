"""Re-run the ``$ moesim`` lines of the console blocks of any doc and write their new output in place.

    python docs/refresh_console.py docs/require.md docs/specdecode.md     # the docs named
    python docs/refresh_console.py --all                                    # every doc with console blocks

``docs/gen_examples.py`` writes the docs it owns from scratch; this keeps every other doc's
examples in step after a change in behaviour (review the diff: the test suite compares the
output of each example, tests/test_docs_examples.py). Commands run from the repository root,
as the tests run them; a command that exits non-zero keeps its output (some examples show a
refusal).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

from moesim.cli import main
from moesim.files import write_text_atomic

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


def _run(command: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(shlex.split(command)[1:])
    return "\n".join(line.rstrip() for line in (out.getvalue() + err.getvalue()).rstrip("\n").splitlines())


def _block(match: re.Match[str]) -> str:
    lines = [f"$ {ln[2:]}\n{_run(ln[2:])}" for ln in match.group(1).splitlines() if ln.startswith("$ moesim ")]
    return "```console\n" + "\n".join(lines) + "\n```" if lines else match.group(0)


def refresh(path: Path) -> bool:
    """Rewrite ``path``'s console blocks; True when the text changed."""
    text = path.read_text()
    new = FENCE.sub(_block, text)
    if new != text:
        write_text_atomic(new, path)
    return new != text


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("docs", nargs="*", type=Path)
    ap.add_argument("--all", action="store_true", help="every Markdown file of docs/ and the README")
    a = ap.parse_args()
    docs = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")]) if a.all else a.docs
    for path in docs:
        if not path.is_file() or path.suffix != ".md":
            print(f"refresh_console: error: DOC must be an existing Markdown file, got {str(path)!r}", file=sys.stderr)
            sys.exit(2)
        if FENCE.search(path.read_text()) and refresh(path):
            print(f"rewrote {path}")


if __name__ == "__main__":
    main_()
