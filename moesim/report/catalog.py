"""Flat records of models and device profiles, for JSON output and tables."""

from __future__ import annotations

from moesim.config.model import RECIPES, ModelSpec
from moesim.config.profiles import AnyProfile, profile_hash
from moesim.config.sections import PROVENANCE_KINDS, Section, numeric_fields, provenance_kind
from moesim.typing_ import JSONValue

__all__ = ["model_record", "profile_record", "pending_fit", "profile_rows", "provenance_summary", "SUMMARY_KINDS"]

#: the columns of a provenance summary: every note kind, and the numbers still pending a fit
SUMMARY_KINDS = (*PROVENANCE_KINDS, "pending")


def _bytes_record(model: ModelSpec, recipe: str) -> dict[str, JSONValue]:
    return {
        "expert_B": model.expert_bytes(recipe),
        "resident_non_expert_B": model.resident_non_expert_bytes(recipe),
        "total_B": model.total_weight_bytes(recipe),
        "by_class_B": {c.value: b for c, b in model.bytes_by_class(recipe).items()},
        "fallbacks": [*model.fallbacks(recipe)],
    }


def model_record(model: ModelSpec) -> dict[str, JSONValue]:
    """Shape, formats, provenance and computed bytes of one model (stable keys)."""
    record = model.model_dump(mode="json", exclude_none=True)
    record["num_moe_layers"] = model.num_moe_layers
    record["num_attention_layers"] = model.num_attention_layers
    record["params"] = {"total": model.total_params(), "active": model.active_params()}
    record["kv_cache_fp16_B_per_token"] = model.kv_cache_bytes_per_token()
    record["bytes"] = {name: _bytes_record(model, name) for name in ["native", *RECIPES]}
    return record


def profile_record(profile: AnyProfile) -> dict[str, JSONValue]:
    """The profile as data, with its hash and the numbers still pending a fit."""
    record = profile.model_dump(mode="json", exclude_none=True)
    record["profile_hash"] = profile_hash(profile)
    record["pending_fit"] = [*pending_fit(profile)]
    record["provenance_summary"] = provenance_summary(profile)
    return record


def pending_fit(profile: AnyProfile) -> list[str]:
    """The numbers of the profile still pending a fit (``section.field``)."""
    return [f"{name}.{field}" for name, sec in profile.sections().items() for field in sec.pending()]


def provenance_summary(profile: AnyProfile) -> dict[str, int]:
    """How many numbers of the profile each provenance kind sources (the note's leading word);
    a number with no value yet, its note 'fitted: pending ...', counts as ``pending``."""
    counts = dict.fromkeys(SUMMARY_KINDS, 0)
    for sec in profile.sections().values():
        pending = set(sec.pending())
        for field, note in sec.provenance.items():
            counts["pending" if field in pending else provenance_kind(note)] += 1
    return counts


def profile_rows(profile: AnyProfile) -> list[tuple[str, str, str]]:
    """(field, value, provenance) for every number and setting of a profile."""
    rows: list[tuple[str, str, str]] = []
    for name, sec in profile.sections().items():
        rows += _section_rows(name, sec)
    return rows


def _section_rows(name: str, sec: Section) -> list[tuple[str, str, str]]:
    """A section's rows; a table of sub-sections (a runtime's code paths) or of names gets one row each."""
    rows: list[tuple[str, str, str]] = []
    nums = set(numeric_fields(type(sec)))
    for field in type(sec).model_fields:
        if field == "provenance":
            continue
        value = getattr(sec, field)
        note = sec.provenance.get(field, "")
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, Section):
                    rows += _section_rows(f"{name}.{field}.{key}", item)
                else:
                    rows.append((f"{name}.{field}.{key}", str(item), ""))
            continue
        if value is None and not note:
            continue
        shown = "(pending fit)" if value is None else str(value)
        rows.append((f"{name}.{field}", shown, note if field in nums else ""))
    return rows
