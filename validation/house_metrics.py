"""Count the sizes issue 38 sets budgets for, over the package source, and compare them with
the issue's baseline and targets.

    python validation/house_metrics.py [--write docs/house-metrics.md] [--no-tool]

What is counted (all over ``moesim/``, except the duplicate pairs, which the issue counted over
the whole tree):

- **modules over 300 lines**: ``.py`` files with more than 300 physical lines, pure data tables
  excepted. A module is a *pure data table* when at least 80% of its code lines (not blank, not a
  comment, not the module docstring, not an import) lie in module-level assignments whose value
  is data: literals, names, calls and arithmetic, with no lambda, comprehension, conditional
  expression or f-string in it. No module of moesim is one today; the rule is there so that a
  table moved into its own module is not counted against the budget.
- **functions over 40 lines**: every ``def`` and ``async def`` (methods and nested functions
  included) whose span, from its ``def`` line to its last line, is over 40 lines (decorators not
  counted): the rule under which the issue's 27 holds at its commit.
- **``dict[str, Any]``**: occurrences of that exact text in ``.py`` files (``grep -o``).
- **duplicate pairs**: pairs of places that share six or more lines, the same lines or lines
  of the same shape, counted by the ``duplicates`` command where this machine has it (the tool
  the issue counted with; it is a command of this workplace, not a package, so the script calls
  it when it is on the PATH), else by this script's own token-window scan (:func:`window_pairs`:
  ``.py`` files, windows of six counted lines alike but for numbers and strings), which is not
  the same count (it misses renamed copies and other languages): each scan is compared with a
  baseline that scan itself measured at the issue's commit.

The baseline is issue 38's (its numbers hold at commit 697c159, "the house after 7,000 new
lines"); the target is the issue's "done when": every module <= 300 lines but data tables,
every function <= 40, ``dict[str, Any]`` and duplicate pairs at most half the baseline.
Only the standard library is used, so the script runs without moesim installed.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dup_kinds import row_is_logic

from moesim.errors import MoesimError
from moesim.files import check_writable, write_text_atomic

REPO = Path(__file__).resolve().parent.parent
MODULE_LINES = 300
FUNCTION_LINES = 40
DATA_SHARE = 0.8
ANY_DICT = "dict[str, Any]"
WINDOW_LINES = 6
#: a window of lines that stands in more places than this is boilerplate, not a copy (as the tool rules)
MAX_PLACES = 8
BASELINE_COMMIT = "697c159"
#: issue 38's counts; the duplicate pairs per scan and tree, each measured at BASELINE_COMMIT
BASELINE = {"modules": 13, "functions": 27, "any_dicts": 131}
BASELINE_PAIRS = {("duplicates", "tree"): 38, ("duplicates", "moesim"): 20,
                  ("window", "tree"): 26, ("window", "moesim"): 8}


@dataclass(frozen=True)
class Module:
    path: str
    lines: int
    data_table: bool


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    line: int
    lines: int


def python_files(root: Path) -> list[Path]:
    """Every ``.py`` file under ``root``, in path order."""
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def _code_lines(source: str) -> set[int]:
    """Line numbers that hold code: not blank, not only a comment."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER):
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


_NOT_DATA = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.IfExp, ast.NamedExpr,
             ast.JoinedStr, ast.Await, ast.Yield, ast.YieldFrom)


def _is_data(node: ast.stmt) -> bool:
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    return not any(isinstance(n, _NOT_DATA) for n in ast.walk(node.value))


def is_data_table(source: str) -> bool:
    """Whether at least 80% of the module's code lines (docstring and imports left out) are
    module-level assignments of data (see the module docstring)."""
    tree = ast.parse(source)
    code = _code_lines(source)
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    counted: set[int] = set()
    data: set[int] = set()
    for node in body:
        span = set(range(node.lineno, (node.end_lineno or node.lineno) + 1)) & code
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        counted |= span
        if _is_data(node):
            data |= span
    return bool(counted) and len(data) >= DATA_SHARE * len(counted)


def modules(root: Path, base: Path) -> list[Module]:
    """Every module under ``root`` with its physical line count and whether it is a data table."""
    out = []
    for path in python_files(root):
        source = path.read_text(encoding="utf-8")
        out.append(Module(str(path.relative_to(base)), len(source.splitlines()), is_data_table(source)))
    return out


def long_modules(mods: list[Module], limit: int = MODULE_LINES) -> list[Module]:
    """Modules over ``limit`` lines that are not data tables, longest first."""
    return sorted((m for m in mods if m.lines > limit and not m.data_table), key=lambda m: (-m.lines, m.path))


def functions(root: Path, base: Path) -> list[Function]:
    """Every function and method under ``root`` with its span from ``def`` to its last line."""
    out = []
    for path in python_files(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = (node.end_lineno or node.lineno) - node.lineno + 1
                out.append(Function(str(path.relative_to(base)), node.name, node.lineno, span))
    return out


def long_functions(funcs: list[Function], limit: int = FUNCTION_LINES) -> list[Function]:
    return sorted((f for f in funcs if f.lines > limit), key=lambda f: (-f.lines, f.path, f.line))


def any_dicts(root: Path, base: Path) -> dict[str, int]:
    """Occurrences of ``dict[str, Any]`` per module (modules with none left out)."""
    counts = {str(p.relative_to(base)): p.read_text(encoding="utf-8").count(ANY_DICT) for p in python_files(root)}
    return {k: v for k, v in counts.items() if v}


# --- duplicate pairs --------------------------------------------------------------------------

_PAIRS_LINE = re.compile(r"^(\d+) pairs? of places")
_ROW = re.compile(r"^D\d+ (\S+) ~ (\S+)")


def parse_duplicates(text: str) -> tuple[int, list[str]]:
    """The pair count and the rows of the ``duplicates`` command's output (0 on "no duplicates")."""
    lines = text.splitlines()
    m = _PAIRS_LINE.match(lines[0]) if lines else None
    count = int(m.group(1)) if m else 0
    return count, [line for line in lines[1:] if _ROW.match(line)]


def tool_pairs(root: Path) -> tuple[int, list[str]] | None:
    """The ``duplicates`` command's pairs over ``root``, or None where this machine has no such command."""
    exe = shutil.which("duplicates")
    if exe is None:
        return None
    proc = subprocess.run([exe, "--repo", str(root), "--most", "200", "--seconds", "120"],
                          capture_output=True, text=True, check=False, timeout=300)
    if "incomplete:" in proc.stdout or not _PAIRS_LINE.match(proc.stdout) and "no duplicates" not in proc.stdout:
        return None
    return parse_duplicates(proc.stdout)


_PUNCT_ONLY = re.compile(r"^[\s()\[\]{},:;.]*$")


def _shape(line: str) -> str:
    """A line with its numbers and strings replaced by placeholders, its names kept: a copy
    that differs only in its values matches, a renamed one does not."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(line.split())
    values = {tokenize.NUMBER: "0", tokenize.STRING: "S"}
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    return " ".join(values.get(tok.type, tok.string) for tok in toks if tok.type not in skip)


def normalized_lines(source: str) -> list[tuple[int, str]]:
    """(line number, shape) of each line that counts: not blank, a comment, an import or lone
    punctuation, white space folded (the rules of the ``duplicates`` command)."""
    out = []
    for number, raw in enumerate(source.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or _PUNCT_ONLY.match(line):
            continue
        if line.startswith(("import ", "from ")) and " import " in f" {line} ":
            continue
        out.append((number, _shape(line)))
    return out


def _windows(lines: list[tuple[int, str]], size: int) -> Iterator[tuple[str, int]]:
    for i in range(len(lines) - size + 1):
        text = "\n".join(shape for _, shape in lines[i:i + size])
        yield hashlib.blake2b(text.encode(), digest_size=12).hexdigest(), i


def window_pairs(files: dict[str, str], size: int = WINDOW_LINES) -> list[tuple[str, str]]:
    """Pairs of files (a file with itself included) that share a window of ``size`` consecutive
    counted lines alike but for their numbers and strings, a window that stands in more than eight places left out as
    boilerplate; two places in one file count only when they do not overlap."""
    places: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for name in sorted(files):
        for digest, start in _windows(normalized_lines(files[name]), size):
            places[digest].append((name, start))
    pairs: set[tuple[str, str]] = set()
    for spots in places.values():
        if len(spots) < 2 or len(spots) > MAX_PLACES:
            continue
        for i, (a, sa) in enumerate(spots):
            for b, sb in spots[i + 1:]:
                if a != b or abs(sa - sb) >= size:
                    pairs.add((a, b))
    return sorted(pairs)


def source_files(root: Path) -> dict[str, str]:
    """The ``.py`` files under ``root`` (tracked or not; build folders and virtual environments left out)."""
    skip = {"build", "__pycache__", "venv", "node_modules", "vendor", "third_party"}
    out = {}
    for path in python_files(root):
        parts = path.relative_to(root).parts
        if skip & set(parts) or any(part.startswith(".") for part in parts):
            continue
        out[str(path.relative_to(root))] = path.read_text(encoding="utf-8", errors="replace")
    return out


@dataclass(frozen=True)
class Pairs:
    scan: str            # "duplicates" (the command) or "window" (this script's scan)
    tree: str            # "tree" (the repository) or "moesim" (the package)
    count: int
    rows: list[str]


def duplicate_pairs(repo: Path, package: Path, use_tool: bool = True) -> list[Pairs]:
    """The pair counts over the whole tree and over the package, by the command where it is
    found, else by the window scan."""
    out = []
    for tree, root in (("tree", repo), ("moesim", package)):
        found = tool_pairs(root) if use_tool else None
        if found is not None:
            out.append(Pairs("duplicates", tree, found[0], found[1]))
        else:
            pairs = window_pairs(source_files(root))
            out.append(Pairs("window", tree, len(pairs), [f"{a} ~ {b}" for a, b in pairs]))
    return out


# --- the report -------------------------------------------------------------------------------

def _row(measure: str, baseline: int, now: int, target: int, rule: str) -> str:
    return f"| {measure} | {baseline} | {now} | {rule} {target} | {'yes' if now <= target else 'no'} |"


def report(repo: Path = REPO, package: Path | None = None, use_tool: bool = True) -> str:
    """The Markdown report: the counts against the baseline and targets, then what is over."""
    package = package or repo / "moesim"
    mods = long_modules(modules(package, repo))
    funcs = long_functions(functions(package, repo))
    dicts = any_dicts(package, repo)
    pairs = duplicate_pairs(repo, package, use_tool)
    n_dicts = sum(dicts.values())
    lines = [
        "# House metrics (issue 38)",
        "",
        "Written by `python validation/house_metrics.py --write docs/house-metrics.md`; what each count means "
        "and how a pure data table is told apart is in the script's docstring. Baseline: issue 38, at commit "
        f"{BASELINE_COMMIT}.",
        "",
        "| measure | baseline | now | target | met |",
        "|---|---:|---:|---|---|",
        _row(f"modules over {MODULE_LINES} lines (data tables excepted)", BASELINE["modules"], len(mods), 0, "="),
        _row(f"functions over {FUNCTION_LINES} lines", BASELINE["functions"], len(funcs), 0, "="),
        _row(f"`{ANY_DICT}`", BASELINE["any_dicts"], n_dicts, BASELINE["any_dicts"] // 2, "<="),
    ]
    for p in pairs:
        base = BASELINE_PAIRS[(p.scan, p.tree)]
        where = "the whole tree" if p.tree == "tree" else "moesim/"
        scan = "`duplicates`" if p.scan == "duplicates" else "window scan"
        lines.append(_row(f"duplicate pairs over {where} ({scan})", base, p.count, base // 2, "<="))
    lines += _logic_note(pairs, repo, package)
    lines += ["", f"## Modules over {MODULE_LINES} lines", ""]
    lines += [f"- `{m.path}`: {m.lines}" for m in mods] or ["None."]
    lines += ["", f"## Functions over {FUNCTION_LINES} lines", ""]
    lines += [f"- `{f.path}:{f.name}` (line {f.line}): {f.lines}" for f in funcs] or ["None."]
    lines += ["", f"## `{ANY_DICT}` by module", ""]
    lines += [f"- `{k}`: {v}" for k, v in sorted(dicts.items(), key=lambda kv: (-kv[1], kv[0]))] or ["None."]
    for p in pairs:
        root = repo if p.tree == "tree" else package
        lines += ["", f"## Duplicate pairs over {'the whole tree' if p.tree == 'tree' else 'moesim/'}", ""]
        lines += [f"- {row}{_kind(p, row, root)}" for row in p.rows] or ["None."]
    return "\n".join(lines) + "\n"


def _kind(p: Pairs, row: str, root: Path) -> str:
    if p.scan != "duplicates":
        return ""
    return " **logic**" if row_is_logic(row, root) else " (declarations)"


def _logic_note(pairs: list[Pairs], repo: Path, package: Path) -> list[str]:
    """How many of the command's pairs share a line of logic (validation/dup_kinds.py), not
    only declarations, table rows and import names: a reading aid beside the issue's count."""
    out = []
    for p in pairs:
        if p.scan == "duplicates":
            root = repo if p.tree == "tree" else package
            logic = sum(row_is_logic(row, root) for row in p.rows)
            where = "the whole tree" if p.tree == "tree" else "moesim/"
            out.append(f"- {where}: {logic} of the {p.count} pairs share a line of logic; the other "
                       f"{p.count - logic} share only declarations, table rows or import names")
    if not out:
        return []
    return ["", "Of those pairs (no target; `validation/dup_kinds.py` says how a row is told apart, each row "
            "below is marked):", "", *out]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="also write the report to this file (docs/house-metrics.md)")
    parser.add_argument("--no-tool", action="store_true", help="count duplicate pairs by the window scan even "
                        "where the duplicates command is found")
    args = parser.parse_args(argv)
    if args.write is not None:     # refused before the work: a folder, a FIFO, a missing folder
        try:
            check_writable(args.write, "--write")
        except MoesimError as exc:
            print(f"house_metrics: error: {exc}", file=sys.stderr)
            return 2
    text = report(use_tool=not args.no_tool)
    sys.stdout.write(text)
    if args.write is not None:
        write_text_atomic(text, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
