"""Types of the plain data that crosses the package's edges: table cells, JSON and TOML documents.

Each alias says what a value can be, so that mypy checks every use of it (a value of ``Any``
is checked nowhere): a value read from a document is narrowed (``isinstance``) before it is
used as a number or a name. Fixed-shape records are ``TypedDict``s or dataclasses next to
their code; these aliases are for data whose keys are open.
"""

from __future__ import annotations

import datetime
from typing import TypeAlias

__all__ = ["Scalar", "JSONValue", "TOMLValue"]

#: one cell of a flat row (a sweep point's parameter, a column of a results table): a number, a
#: name, a switch, or None for "not given"
Scalar: TypeAlias = str | int | float | bool | None

#: a JSON value, as :func:`json.loads` makes it and :func:`json.dumps` writes it (a ``--json`` result,
#: what ``moesim rerun`` reads back)
JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"

#: a TOML value, as :func:`tomllib.loads` makes it (a document is a ``dict[str, TOMLValue]``)
TOMLValue: TypeAlias = ("dict[str, TOMLValue] | list[TOMLValue] | str | int | float | bool"
                        " | datetime.datetime | datetime.date | datetime.time")
