"""Set one number of a profile TOML file in place, with its provenance, keeping comments.

The file is rewritten atomically (temporary file + rename); a value line is replaced or
inserted at the end of its ``[section]``, its note in ``[section.provenance]`` likewise.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

__all__ = ["set_profile_value"]


def _set_in_table(lines: list[str], table: str, key: str, rendered: str) -> list[str]:
    header = f"[{table}]"
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == header)
    except StopIteration:
        raise KeyError(f"table [{table}] not found") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for i in range(start + 1, end):
        if pattern.match(lines[i]):
            lines[i] = f"{key} = {rendered}"
            return lines
    insert = end
    while insert > start + 1 and not lines[insert - 1].strip():
        insert -= 1
    lines.insert(insert, f"{key} = {rendered}")
    return lines


def set_profile_value(path: Path, section: str, key: str, value: float, note: str) -> None:
    lines = path.read_text().splitlines()
    lines = _set_in_table(lines, section, key, repr(float(value)))
    escaped = note.replace("\\", "\\\\").replace('"', '\\"')
    lines = _set_in_table(lines, f"{section}.provenance", key, f'"{escaped}"')
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
