"""Set one number of a profile TOML file in place, with its provenance, keeping comments.

The file is edited with tomlkit, which keeps every comment, blank line and the order of
keys; a value is replaced where it stands (an inline comment after it stays) or appended
to its ``[section]``, its note in ``[section.provenance]`` likewise. The file is rewritten
atomically (:func:`moesim.files.write_text_atomic`).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit

from moesim.errors import InputError
from moesim.files import write_text_atomic
from moesim.inputs import read_input_text

__all__ = ["set_profile_value"]


def _table(doc: tomlkit.TOMLDocument, dotted: str, path: Path) -> MutableMapping[str, Any]:
    node: Any = doc
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, MutableMapping) else None
    if not isinstance(node, MutableMapping):
        raise InputError(f"[{dotted}]", "is not a table of the profile", show_value=False, source=str(path))
    return node


def set_profile_value(path: Path, section: str, key: str, value: float, note: str) -> None:
    """Set ``[section] key = value`` (a float) and ``[section.provenance] key = note``."""
    doc = tomlkit.parse(read_input_text(path, "--device", "config"))
    _table(doc, section, path)[key] = float(value)
    _table(doc, f"{section}.provenance", path)[key] = note
    text = tomlkit.dumps(doc)
    write_text_atomic(text if text.endswith("\n") else text + "\n", path)
