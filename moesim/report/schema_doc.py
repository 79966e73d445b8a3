"""Generate the schema reference pages (docs/reference/*.md) from the pydantic models.

Run ``python -m moesim.report.schema_doc docs/reference`` after changing a schema; the
test suite fails when the committed pages differ from what this module generates.
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel

from moesim.config.catalog import list_models
from moesim.config.device import CodePathSection, GPURuntimeSection, GPUServerProfile, HostProfile, MobileNPUProfile
from moesim.config.formats import FORMAT_INFO
from moesim.config.model import RECIPES, GQAttention, MLAttention, ModelSpec, MoEShape, WeightRecipe
from moesim.config.sections import PROVENANCE_KINDS, UNIT_BOUNDS, Section
from moesim.files import write_text_atomic
from moesim.units import UNIT_SUFFIXES, unit_of

__all__ = ["render_profiles_reference", "render_models_reference", "write_reference"]


def _type_name(annotation: typing.Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " or ".join(f'"{a}"' for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


_OPS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _constraints(metadata: list[typing.Any], annotation: typing.Any) -> dict[str, typing.Any]:
    """The gt/ge/lt/le bounds of a field, from its metadata and from an ``Annotated`` in its type."""
    found = {op: getattr(m, op) for m in metadata for op in _OPS if getattr(m, op, None) is not None}
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Annotated:
            inner = typing.get_args(arg)[1:]
            found.update(_constraints([c for m in inner for c in getattr(m, "metadata", [m])], None))
    return found


def _range(cls: type[BaseModel], name: str) -> str:
    """The field's range as the loader checks it (the unit's physical bound for a profile number)."""
    field = cls.model_fields[name]
    found = _constraints(list(field.metadata), field.annotation)
    bound = UNIT_BOUNDS.get(unit_of(name) or "") if issubclass(cls, Section) else None
    if bound is not None and "le" not in found and "lt" not in found:
        found["le"] = bound[0]
    return ", ".join(f"{_OPS[op]} {found[op]:,.10g}" for op in _OPS if op in found)


def _field_table(cls: type[BaseModel]) -> list[str]:
    lines = ["| field | type | unit | range | required | description |", "|---|---|---|---|---|---|"]
    for name, field in cls.model_fields.items():
        if name == "provenance" and issubclass(cls, Section):
            continue
        unit = unit_of(name) or ""
        required = "yes" if field.is_required() else "no"
        desc = (field.description or "").replace("|", "/")
        lines.append(f"| `{name}` | {_type_name(field.annotation)} | {unit.lstrip('_')} | {_range(cls, name)} "
                     f"| {required} | {desc} |")
    return lines


def _section_classes(profile_cls: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    out: list[tuple[str, type[BaseModel]]] = []
    for name, field in profile_cls.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            out.append((name, ann))
    return out


def render_profiles_reference() -> str:
    lines = ["# Device profile schema", "",
             "Generated from the pydantic models by `python -m moesim.report.schema_doc docs/reference`;",
             "do not edit by hand. Profiles are TOML files; unknown fields are rejected.", "",
             "Every number carries a unit suffix and, in the section's `[<section>.provenance]` table,",
             "a note whose first word is its kind: " + ", ".join(f"`{k}:`" for k in PROVENANCE_KINDS) + ".",
             "A number not known yet is left out and noted `fitted: pending ...`; code that needs it",
             "stops with a NotFittedError rather than using a default.", "",
             "A number is also held to its unit's physical range when the profile is loaded and on every",
             "`--set` (a few times the largest shipping part, so that only a typo or a unit mistake is refused).",
             "", "## Unit suffixes", "", "| suffix | meaning | at most | evidence |", "|---|---|---|---|"]
    for suffix, meaning in UNIT_SUFFIXES.items():
        top, why = UNIT_BOUNDS.get(suffix, (None, ""))
        lines.append(f"| `{suffix}` | {meaning} | {'' if top is None else f'{top:,.10g}'} | {why} |")
    for profile_cls in (MobileNPUProfile, GPUServerProfile, HostProfile):
        kind = typing.get_args(profile_cls.model_fields["kind"].annotation)[0]
        lines += ["", f"## kind = \"{kind}\" ({profile_cls.__name__})", "", (profile_cls.__doc__ or "").strip(), ""]
        for section, cls in _section_classes(profile_cls):
            lines += [f"### [{section}]", "", (cls.__doc__ or "").strip(), ""] + _field_table(cls) + [""]
            if cls is GPURuntimeSection:
                lines += ["### [runtime.paths.NAME]", "", (CodePathSection.__doc__ or "").strip(), ""] + \
                    _field_table(CodePathSection) + [""]
    return "\n".join(lines).rstrip() + "\n"


def render_models_reference() -> str:
    lines = ["# Model schema and catalog", "",
             "Generated from the pydantic models by `python -m moesim.report.schema_doc docs/reference`;",
             "do not edit by hand. A model is a TOML file (the catalog's are in `moesim/config/models/`);",
             "pass your own with `--model path/to/model.toml`.", ""]
    for cls in (ModelSpec, GQAttention, MLAttention, MoEShape, WeightRecipe):
        lines += [f"## {cls.__name__}", "", (cls.__doc__ or "").strip(), ""] + _field_table(cls) + [""]
    lines += ["## Weight formats", "", "| format | weights per block | bytes per block | bits per weight | layout |",
              "|---|---|---|---|---|"]
    for fmt, info in FORMAT_INFO.items():
        lines.append(f"| {fmt.value} | {info.block_weights} | {info.block_bytes} | {info.bits_per_weight:g} "
                     f"| {info.source} |")
    lines += ["", "## Recipes", "",
              "`native` is each model's checkpoint formats (`native_formats`). Shared recipes:", ""]
    for name, recipe in RECIPES.items():
        parts = ", ".join(f"{k}={v.value}" for k, v in recipe.model_dump(exclude_none=True).items())
        lines.append(f"- `{name}`: {parts}")
    lines += ["", "## Catalog", "", "| model | MoE layers | dense | hidden | expert ffn | routed | shared | top-k | "
              "Q4_0 bytes/expert | native bytes/expert | config source |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in list_models():
        lines.append(f"| `{m.name}` | {m.num_moe_layers} | {m.num_dense_layers} | {m.hidden_size} | "
                     f"{m.moe.expert_intermediate_size} | {m.moe.num_routed_experts} | {m.moe.num_shared_experts} | "
                     f"{m.moe.top_k} | {m.expert_bytes('q4_0'):,} | {m.expert_bytes():,} | {m.provenance} |")
    return "\n".join(lines).rstrip() + "\n"


def write_reference(folder: Path) -> list[Path]:
    pages = {"profiles.md": render_profiles_reference(), "models.md": render_models_reference()}
    return [write_text_atomic(text, folder / name) for name, text in pages.items()]


if __name__ == "__main__":  # pragma: no cover
    for p in write_reference(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference")):
        print(p)
