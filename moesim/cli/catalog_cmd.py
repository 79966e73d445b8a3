"""``moesim models`` and ``moesim devices``: list and validate catalog data."""

from __future__ import annotations

import click

from moesim.cli.models_import_cmd import import_model
from moesim.cli.output import emit_json, emit_table, fmt_num
from moesim.config.catalog import list_models, load_model
from moesim.config.model import ModelSpec
from moesim.config.profiles import list_profiles, load_profile
from moesim.errors import InputError
from moesim.report.catalog import (
    SUMMARY_KINDS,
    model_record,
    pending_fit,
    profile_record,
    profile_rows,
    provenance_summary,
)

__all__ = ["models", "devices"]

_MiB = 2**20


@click.group(invoke_without_command=True)
@click.option("--model", "model_ref", metavar="NAME|PATH",
              help="Show one model (catalog name, TOML file, or a config.json or .gguf to import).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def models(ctx: click.Context, model_ref: str | None, as_json: bool) -> None:
    """List the model catalog with computed expert and resident bytes.

    `moesim models import SRC -o model.toml` writes a model file from a Hugging Face config.json or a
    GGUF file's header (docs/import-models.md)."""
    if ctx.invoked_subcommand is not None:
        return
    shown = [_load(model_ref)] if model_ref is not None else list_models()
    if as_json:
        emit_json({"models": [model_record(m) for m in shown]})
        return
    rows = []
    for m in shown:
        shared = f"+{m.moe.num_shared_experts}" if m.moe.num_shared_experts else ""
        layers = f"{m.num_moe_layers}+{m.num_dense_layers}d" if m.num_dense_layers else str(m.num_moe_layers)
        rows.append((m.name, layers, m.hidden_size, m.moe.expert_intermediate_size,
                     f"{m.moe.num_routed_experts}{shared}", m.moe.top_k, m.attention.kind,
                     fmt_num(m.expert_bytes("q4_0")), fmt_num(m.expert_bytes("native")),
                     fmt_num(m.resident_non_expert_bytes("q4_0") / _MiB, 1),
                     f"{m.total_params() / 1e9:.2f}"))
    emit_table(["model", "moe_layers", "hidden", "expert_ffn", "experts", "top_k", "attn",
                "expert_B_q4_0", "expert_B_native", "resident_MiB_q4_0", "params_B"], rows)


models.add_command(import_model, "import")


def _load(ref: str) -> ModelSpec:
    """``load_model``, its errors under ``--model`` (the CLI's blame finds no leaf command under a group
    whose option values read as words)."""
    try:
        return load_model(ref)
    except InputError as exc:
        raise (exc.renamed("--model") if exc.field == "model" and not exc.source else exc) from None


@click.command()
@click.option("--device", "device_ref", metavar="NAME|PATH",
              help="Validate and show one profile (bundled name or TOML file).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def devices(device_ref: str | None, as_json: bool) -> None:
    """List device profiles, or validate and show one with --device.

    The list counts each profile's numbers by provenance: spec, paper, measured, fitted, derived,
    assumed (the leading word of each note) and pending (no value until a calibration fits it)."""
    profiles = [load_profile(device_ref)] if device_ref is not None else list_profiles()
    if as_json:
        emit_json({"devices": [profile_record(p) for p in profiles]})
        return
    if device_ref is not None:
        p = profiles[0]
        click.echo(f"{p.name} ({p.kind}): {p.display_name}")
        emit_table(["field", "value", "provenance"], profile_rows(p))
        return
    rows = [(p.name, p.kind, len(pending_fit(p)), *provenance_summary(p).values(), p.display_name)
            for p in profiles]
    emit_table(["device", "kind", "pending_fit", *SUMMARY_KINDS, "description"], rows)
