"""Read TOML data files into pydantic models, turning every failure into one InputError.

The message names the file, the dotted field path, the rule and the offending value,
e.g. ``my.toml: ufs.read_bw_GBps must be > 0, got -1.0``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from moesim.errors import InputError
from moesim.inputs import exists, is_dir, parse_toml, read_input
from moesim.typing_ import TOMLValue

__all__ = ["read_toml", "validate_data", "validate_union", "input_error_from", "check_own_name", "file_ref",
           "bundled_or_path"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_RULES = {
    "extra_forbidden": "is not a known field (check the spelling and the unit suffix)",
    "missing": "is required",
}


def _path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif parts:
            parts.append(f".{item}")
        else:
            parts.append(str(item))
    return "".join(parts)


def _user_loc(loc: tuple[int | str, ...], data: Any) -> tuple[int | str, ...]:
    """Drop the entries pydantic adds that are not keys of the user's data.

    A discriminated union puts its tag (``"gqa"``, ``"gpu-server"``) in the location;
    a user looks for ``attention.num_heads``, not ``attention.gqa.num_heads``.
    """
    out: list[int | str] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part not in node and node.get("kind") == part:
            continue
        out.append(part)
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _classes(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic model classes an annotation may hold (through unions and ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [c for arg in typing.get_args(annotation) for c in _classes(arg)]


def _upper_bound_note(model: Any, loc: tuple[int | str, ...]) -> str:
    """The description of the field at ``loc`` (where a physical range states its evidence)."""
    classes = _classes(model)
    field = None
    for part in loc:
        found = [c for c in classes if isinstance(part, str) and part in c.model_fields]
        if not found:       # a union's tag: keep the member of that kind
            classes = [c for c in classes if "kind" in c.model_fields and c.model_fields["kind"].default == part]
            continue
        field = found[0].model_fields[str(part)]
        classes = _classes(field.annotation)
    return f" ({field.description})" if field is not None and field.description else ""


def input_error_from(exc: ValidationError, source: str | None, data: Any = None, model: Any = None) -> InputError:
    """The first problem of a pydantic ValidationError as a one-line InputError; an upper bound
    is followed by the field's description (where a physical range names its evidence)."""
    err = exc.errors(include_url=False)[0]
    loc = _user_loc(tuple(err["loc"]), data)
    field = _path(loc) or "(top level)"
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    kind = err["type"]
    if kind == "value_error":
        text = str(err["msg"]).removeprefix("Value error, ")
        prefix = field + "." if loc else ""
        return InputError(prefix + text + suffix, "", show_value=False, source=source)
    rule = _RULES.get(kind) or str(err["msg"]).replace("Input should be", "must be")
    if kind in ("less_than_equal", "less_than") and model is not None:
        rule += _upper_bound_note(model, tuple(err["loc"]))
    if kind == "missing":
        return InputError(field, rule + suffix, show_value=False, source=source)
    value = f"{err.get('input')!r}{suffix}" if isinstance(err.get("input"), str) else f"{err.get('input')}{suffix}"
    return InputError(field, f"{rule}, got {value}", show_value=False, source=source)


def validate_data(model: type[M], data: Mapping[str, object], source: str | None = None) -> M:
    """Validate a mapping into ``model``; raise InputError on the first problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise input_error_from(exc, source, data, model) from None


def validate_union(adapter: TypeAdapter[T], data: Mapping[str, object], source: str | None = None) -> T:
    """Validate a mapping through a discriminated-union adapter."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise input_error_from(exc, source, data) from None


def read_toml(path: Path, field: str = "path") -> dict[str, TOMLValue]:
    """Parse a TOML file (``field`` names where the path came from: ``device``, ``model``);
    a missing, unreadable or special file (a FIFO, a device), one over the size cap of a
    configuration, a syntax error or nesting too deep becomes an InputError (:mod:`moesim.inputs`)."""
    data = read_input(path, field, "config")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("TOML", f"must be UTF-8 text (byte {exc.start} is not)", show_value=False,
                         source=str(path)) from None
    return parse_toml(text, "TOML", source=str(path))


def check_own_name(name: str, path: Path, bundled: Path, what: str) -> None:
    """A data file given by path may not take the name of a bundled one (``bundled`` is that
    folder): results, stored profiles and real traces are matched by name, so a copy called
    ``h200x8-hf`` would be taken for the bundled profile. The bundled file itself passes."""
    own = bundled / f"{name}.toml"
    if own.is_file() and path.resolve() != own.resolve():
        raise InputError("name", f"must not be a bundled {what}'s name (results and real traces are matched by "
                         f"name): rename it, e.g. {name + '-custom'!r}", name, source=str(path))


def bundled_or_path(name_or_path: str | Path, bundled: list[str], field: str, expects: str) -> str | Path:
    """``name_or_path`` as a bundled name (one of ``bundled``, returned as it is) or as a path; the
    empty text and a folder are refused (``field`` must name ``expects``)."""
    text = str(name_or_path)
    if text in bundled:
        return text
    path = Path(text)
    if not text.strip() or is_dir(path):        # '' is the current folder to Path
        raise InputError(field, f"must name {expects}", text)
    return path


def file_ref(text: str, bundled: list[str]) -> str:
    """How a result stores a model or device reference: a bundled name as written, a file path
    made absolute, so that ``moesim rerun`` finds the file from any folder."""
    if text in bundled:
        return text
    path = Path(text)
    return str(path.resolve()) if path.suffix == ".toml" or exists(path) else text
