"""``moesim rerun RESULT.json``: re-run a saved ``--json`` result from its configuration."""

from __future__ import annotations

from pathlib import Path

import click

from moesim.cli.decode_cmd import show_decode
from moesim.cli.output import json_clean
from moesim.cli.prefill_cmd import show_prefill
from moesim.cli.specdecode_cmd import show_specdecode
from moesim.errors import InputError
from moesim.inputs import parse_json, read_input
from moesim.results import DecodeResult, PrefillResult
from moesim.simulate.rerun import describe_differences
from moesim.simulate.rerun import rerun as rerun_result

__all__ = ["rerun"]


@click.command()
@click.argument("result_path", metavar="RESULT.json", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def rerun(result_path: str, as_json: bool) -> None:
    """Re-run a saved --json result (prefill, specdecode or decode) from the configuration it carries.

    Prints the result again; the host-clock fields (sim.wall_s, sim.steps_per_wall_s,
    config.selection_ms) aside, it is the saved result, or the command says which keys differ."""
    path = Path(result_path)
    saved = parse_json(read_input(path, "RESULT.json", "result"), "RESULT.json", result_path,
                       "the JSON of a --json result")
    result = rerun_result(saved, source=str(path))
    if isinstance(result, PrefillResult):
        show_prefill(result.metrics, as_json)
    elif isinstance(result, DecodeResult):
        show_decode(result.metrics, as_json)
    else:
        show_specdecode(result.metrics, as_json)
    shown = describe_differences(saved, json_clean(result.to_dict()))
    if shown:       # an edited result, or one saved by a moesim that computed otherwise
        raise InputError("RESULT.json", f"must re-run to the saved result; it differs in {shown}", show_value=False,
                         source=str(path))
