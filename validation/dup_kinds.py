"""Tell a ``duplicates`` row whose shared lines hold logic from one whose lines only declare
or list things (for ``validation/house_metrics.py``).

The ``duplicates`` command pairs runs of six lines *of the same shape*: alike but for their
names, strings and numbers. Six pydantic fields pair with six other pydantic fields, six
names of one import list with six of another, six rows of one test's expected table with six
of another's, though no line is written twice. This module reads the run a row names, on both
sides, and calls the row **logic** when a line of it, on either side, does something:

- a statement that starts with a control keyword (``if``, ``for``, ``while``, ``return``,
  ``yield``, ``raise``, ``with``, ``try``, ``except``, ``assert``, ``del``, ``lambda`` ...);
- an assignment (`` = `` with spaces; ``name=value`` without them is a keyword argument) other
  than ``self.name = name`` or ``self.name = <number or None>`` (an ``__init__`` keeping its
  arguments and zeroing its counters) and other than a module-level ``__all__``, constant
  (``UPPER_CASE``) or type alias (``CamelCase``);
- a call made as a statement (a line that starts with a name and a ``(`` and does not end in
  a ``,``, which would make it an element of a table);
- an annotated assignment whose value is not a constant or a ``Field(...)``/``field(...)`` (so
  ``total: int = sum(xs)`` in a function is logic, ``size: int = 0`` in a class is not).

Every other line declares or lists: an annotated field (``name: type = default``), a
decorator, a ``class`` or ``def`` line, a docstring or string continuation, an import list's
name, a row of a literal table (a line that ends in ``,``), a closing bracket. A row that
says ``(+N more runs)`` is judged by the run it names (the longest). The rule is a reading
aid, not a parser: it is what the report's "share a line of logic" count counts, and each row
of the report is marked so that every call can be checked by eye.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["ROW", "is_logic_line", "row_is_logic"]

ROW = re.compile(r"^D\d+ (\S+):(\d+)-(\d+) ~ (\S+):(\d+)-(\d+)")
_KEYWORDS = ("if", "elif", "else", "for", "while", "return", "yield", "raise", "with", "try", "except", "finally",
             "assert", "del", "await", "break", "continue", "lambda", "async", "global", "nonlocal")
_STARTS_KEYWORD = re.compile(r"^(" + "|".join(_KEYWORDS) + r")\b")
_ASSIGN = re.compile(r"^([A-Za-z_][\w.\[\]'\"]*(\s*,\s*[A-Za-z_][\w.]*)*)\s+([-+*/%|&^@]|//|\*\*|<<|>>)?=\s+(.*)$")
_DECLARED_NAME = re.compile(r"^(__all__|[A-Z_][A-Z0-9_]*|[A-Z]\w*)$")
_ANNOTATED = re.compile(r"^[A-Za-z_]\w*\s*:\s*[^=]+(=(?!=).*)?$")
_KEEPS_ARG = re.compile(r"^self\.(\w+)$")
_CONSTANT = re.compile(r"^(-?[\d.e_]+|None|True|False|\[\]|\{\}|\(\)|set\(\))$")
_FIELD_CALLS = ("Field(", "field(", "dataclasses.field(", "PrivateAttr(")
_CALL_STATEMENT = re.compile(r"^[A-Za-z_][\w.]*(\[[^\]]*\])?\(")


def is_logic_line(raw: str) -> bool:
    """Whether one source line does something (the rule of the module docstring)."""
    line = raw.strip()
    if not line or line.startswith(("#", "@", "class ", "def ", '"', "'", "f\"", "r\"", "b\"")):
        return False
    if line.startswith(("import ", "from ")):
        return False
    if _STARTS_KEYWORD.match(line):
        return True
    annotated = _ANNOTATED.match(line)
    if annotated and not line.startswith("self."):
        value = (annotated.group(1) or "=").lstrip("=").strip()
        return not (not value or _CONSTANT.match(value) or value.startswith(_FIELD_CALLS))
    assign = _ASSIGN.match(line)
    if assign is not None:
        target, op, value = assign.group(1), assign.group(3), assign.group(4).strip()
        if raw[:1] not in (" ", "\t") and op is None and _DECLARED_NAME.match(target):
            return False                   # a module's __all__, constant or type alias
        kept = _KEEPS_ARG.match(target)
        if op is None and kept is not None and (value == kept.group(1) or _CONSTANT.match(value)):
            return False
        return not line.endswith(",")      # a keyword argument of a table row is data
    return bool(_CALL_STATEMENT.match(line)) and not line.endswith(",")


def _lines(root: Path, path: str, first: int, last: int) -> list[str]:
    return (root / path).read_text(encoding="utf-8", errors="replace").splitlines()[first - 1:last]


def row_is_logic(row: str, root: Path) -> bool:
    """Whether a ``duplicates`` row's named run holds a line of logic on either side (paths in the
    row are relative to ``root``, the folder the command was run over)."""
    m = ROW.match(row)
    if m is None:
        raise ValueError(f"not a duplicates row: {row!r}")
    sides = ((m.group(1), int(m.group(2)), int(m.group(3))), (m.group(4), int(m.group(5)), int(m.group(6))))
    return any(is_logic_line(line) for path, a, b in sides for line in _lines(root, path, a, b))
