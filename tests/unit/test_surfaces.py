"""One schema, many surfaces (issue 24): a CLI option's default and a grid parameter's default
are the run model's, so a default exists once. Each test reads the option or parameter as the
user sees it and compares it with the run's field."""

from __future__ import annotations

from typing import Any

import click
import pytest
from pydantic import BaseModel

from moesim.cli.autoconfig_cmd import autoconfig
from moesim.cli.compare_cmd import compare
from moesim.cli.decode_cmd import decode
from moesim.cli.prefill_cmd import prefill
from moesim.cli.specdecode_cmd import specdecode
from moesim.config.base import field_default
from moesim.config.decode import DecodeRun
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.config.schema import surface_params
from moesim.config.specdecode import DraftTree, SpecDecodeRun
from moesim.sweep.params import grid_params

#: the run model behind each command (``--policy`` shows the default policy's kind, compare's
#: ``--tokens`` the default length as its list)
COMMANDS: list[tuple[click.Command, type[BaseModel]]] = [
    (prefill, PrefillRun), (compare, PrefillRun), (autoconfig, PrefillRun), (specdecode, SpecDecodeRun),
    (decode, DecodeRun)]


def _shown(default: Any) -> Any:
    """A run field's default as an option or a grid shows it: a section by its kind."""
    return default.model_dump()["kind"] if isinstance(default, BaseModel) else default


def _option_defaults(command: click.Command) -> dict[str, Any]:
    """The defaults ``--help`` shows, by parameter name."""
    return {p.name: p.default for p in command.params if isinstance(p, click.Option) and p.name and p.show_default}


@pytest.mark.parametrize(("command", "run"), COMMANDS, ids=[c.name or "" for c, _ in COMMANDS])
def test_every_option_named_after_a_run_field_defaults_to_the_field(command: click.Command,
                                                                     run: type[BaseModel]) -> None:
    shown = _option_defaults(command)
    shared = [n for n in shown if n in run.model_fields]
    assert shared, command.name
    for name in shared:
        want = _shown(field_default(run, name))
        assert shown[name] in (want, str(want)), f"{command.name} --{name}"


def test_the_options_of_nested_run_sections_default_to_theirs() -> None:
    assert _option_defaults(autoconfig)["prefetch"] == field_default(EStreamPolicy, "prefetch")
    spec = _option_defaults(specdecode)
    assert (spec["depth"], spec["width"]) == (field_default(DraftTree, "depth"), field_default(DraftTree, "width"))
    assert spec["draft_routing"] == field_default(SpecDecodeRun, "routing").kind


@pytest.mark.parametrize(("workload", "run"), [("prefill", PrefillRun), ("specdecode", SpecDecodeRun),
                                               ("decode", DecodeRun)])
def test_every_grid_parameter_defaults_to_the_run_field(workload: str, run: type[BaseModel]) -> None:
    params = grid_params(workload).model_fields
    flat = surface_params(run)
    assert list(params) == list(flat)
    for name, info in params.items():
        if name in run.model_fields:
            assert info.default == _shown(field_default(run, name)), f"{workload}.{name}"
        else:           # a section's field (a policy option, the tree's depth): None, the section's own default applies
            assert info.default is None and flat[name].key not in (None, "kind"), f"{workload}.{name}"
