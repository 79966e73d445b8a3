"""``moesim rerun RESULT.json``: re-run a saved ``--json`` result from its configuration."""

from __future__ import annotations

import json
from pathlib import Path

import click

from moesim.cli.decode_cmd import show_decode
from moesim.cli.output import json_clean
from moesim.cli.prefill_cmd import show_prefill
from moesim.cli.specdecode_cmd import show_specdecode
from moesim.errors import InputError
from moesim.results import DecodeResult, PrefillResult
from moesim.simulate.rerun import differences
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
    try:
        saved = json.loads(path.read_bytes())
    except OSError as exc:
        raise InputError("RESULT.json", f"must be a readable file ({exc.strerror})", result_path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError("RESULT.json", f"must be the JSON of a --json result ({exc})", result_path) from None
    result = rerun_result(saved, source=str(path))
    if isinstance(result, PrefillResult):
        show_prefill(result.metrics, as_json)
    elif isinstance(result, DecodeResult):
        show_decode(result.metrics, as_json)
    else:
        show_specdecode(result.metrics, as_json)
    diff = differences(saved, json_clean(result.to_dict()))
    if diff:
        shown = ", ".join(diff[:5]) + (f" and {len(diff) - 5} more" if len(diff) > 5 else "")
        raise click.ClickException(f"the re-run differs from {path} in {shown}")
