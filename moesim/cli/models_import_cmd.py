"""``moesim models import SRC``: a model TOML from a Hugging Face ``config.json`` or a GGUF file."""

from __future__ import annotations

from pathlib import Path

import click

from moesim.cli.output import emit_json, writable_path
from moesim.config.catalog import CATALOG_DIR
from moesim.config.formats import WeightFormat
from moesim.config.hf_import import ImportFormats, model_from_hf_config, model_name_from, model_toml, read_hf_config
from moesim.config.loading import check_own_name
from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.files import check_replaceable, write_text_atomic
from moesim.report.catalog import model_record

__all__ = ["import_model"]

_FORMATS = click.Choice([f.value for f in WeightFormat])
#: how every model TOML this command writes begins: an existing file that does not is kept
_SIGNATURE = b'name = "'


@click.command()
@click.argument("src", metavar="SRC")
@click.option("-o", "--out", metavar="FILE", callback=writable_path,
              help="Write the model TOML here (an existing file is replaced only if it is a model TOML); "
                   "default: standard output.")
@click.option("--name", metavar="NAME", help="The model's name; default: the --out file's stem, else SRC's "
                                             "(a config.json's folder).")
@click.option("--hf-repo", metavar="OWNER/NAME", help="The Hugging Face repository it came from (written with the "
                                                      "provenance); default: the file's own record, if any.")
@click.option("--format", "default_format", type=_FORMATS,
              help="config.json: the format of every weight, replacing what quantization_config / torch_dtype "
                   "say (default: those, else BF16).")
@click.option("--expert-format", type=_FORMATS,
              help="config.json: the routed experts' format (default: quantization_config's, else as --format).")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable output: the model's record, the file written (or the TOML text) and the "
                   "tensor table's expert bytes of a GGUF.")
def import_model(src: str, out: str | None, name: str | None, hf_repo: str | None, default_format: str | None,
                 expert_format: str | None, as_json: bool) -> None:
    """Write a model TOML from a Hugging Face config.json or a GGUF file's header and tensor table.

    A GGUF's formats are its tensors' real types (the weights are never read): the model's expert bytes
    equal the tensor table's, or its notes say by how much they differ."""
    if out is not None:
        check_replaceable(out, "-o", _SIGNATURE, "a model TOML")
    chosen = name or (model_name_from(out) if out is not None else model_name_from(src))
    formats = ImportFormats(default=default_format and WeightFormat(default_format),
                            expert=expert_format and WeightFormat(expert_format))
    model, summary, table = _import(src, chosen, formats, hf_repo)
    text = model_toml(model)
    if out is not None:
        check_own_name(model.name, Path(out), CATALOG_DIR, "model")
        write_text_atomic(text, out)
    if as_json:
        emit_json({"model": model_record(model), "out": out, "toml": None if out else text,
                   "tensor_table_expert_bytes": table})
    elif out is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"wrote {out}: {model.name}, {model.num_moe_layers} MoE layers of {model.moe.num_routed_experts} "
                   f"experts, top-{model.moe.top_k}, {summary}")


def _import(src: str, name: str, formats: ImportFormats,
            hf_repo: str | None) -> tuple[ModelSpec, str, dict[int, int] | None]:
    """The model, one line on its expert bytes, and a GGUF's expert bytes per MoE block."""
    if src.lower().endswith(".gguf"):
        if formats.default is not None or formats.expert is not None:
            raise InputError("--format / --expert-format", "must not be given for a GGUF file (its formats are its "
                             "tensors' types)", show_value=False)
        from moesim.config.gguf_import import model_from_gguf

        got = model_from_gguf(src, name=name, hf_repo=hf_repo)
        table = sorted(set(got.table_expert_bytes.values()))
        said = "exact" if got.exact else "differs: its expert tensors mix types (see notes)"
        return got.model, (f"expert bytes {got.model.expert_bytes():,} "
                           f"(tensor table: {' to '.join(f'{b:,}' for b in table)}, {said})"), got.table_expert_bytes
    model = model_from_hf_config(read_hf_config(src), name=name, source=src, formats=formats, hf_repo=hf_repo)
    fmt = model.native_formats.format_of(model.expert_tensors()[0].cls).value
    return model, f"expert bytes {model.expert_bytes():,} ({fmt})", None
