"""``moesim rerun RESULT.json``: re-run a saved ``--json`` result from its configuration.

The result is printed by the command of its workload (:data:`moesim.simulate.WORKLOADS`; each
workload's command, named as it, has ``show_<workload>``), so a new workload needs no edit here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from moesim.cli.output import json_clean
from moesim.errors import InputError
from moesim.inputs import parse_json, read_input
from moesim.simulate.rerun import describe_differences
from moesim.simulate.rerun import rerun as rerun_result

__all__ = ["rerun", "show_of"]


def show_of(workload: str) -> Callable[[Any, bool], None]:
    """The function that prints a ``workload`` result as its command does: ``show_<workload>`` of the
    command's module (:data:`moesim.cli.COMMANDS`)."""
    from moesim.cli import COMMANDS

    show: Callable[[Any, bool], None] = getattr(importlib.import_module(f"moesim.cli.{COMMANDS[workload][0]}"),
                                                f"show_{workload}")
    return show


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
    show_of(result.metrics.config.workload)(result.metrics, as_json)
    shown = describe_differences(saved, json_clean(result.to_dict()))
    if shown:       # an edited result, or one saved by a moesim that computed otherwise
        raise InputError("RESULT.json", f"must re-run to the saved result; it differs in {shown}", show_value=False,
                         source=str(path))
