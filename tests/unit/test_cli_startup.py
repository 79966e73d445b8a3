"""A fast start: ``moesim --version`` and ``--help`` import no simulator code, and the command
list that ``--help`` shows from the lazy registry is each command's own short help."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest

from moesim.cli import COMMANDS, cli, short_help

HEAVY = ("pandas", "numpy", "networkx", "simpy", "scipy", "pydantic", "rich", "moesim.config", "moesim.cli.prefill_cmd")

#: run ``python -m moesim ARGS`` in this interpreter, then print the heavy modules it loaded
PROBE = """
import json, runpy, sys
sys.argv = ["moesim", *{args!r}]
try:
    runpy.run_module("moesim", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "heavy": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
def test_version_and_help_import_no_heavy_module(args: list[str]) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                         text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"code": 0, "heavy": []}


def _command(name: str) -> click.Command:
    module, attr, _ = COMMANDS[name]
    command = getattr(importlib.import_module(f"moesim.cli.{module}"), attr)
    assert isinstance(command, click.Command)
    return command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_stored_short_help_is_the_commands_own(name: str) -> None:
    command = _command(name)
    assert COMMANDS[name][2] == command.get_short_help_str(limit=10_000)
    for limit in (20, 45, 60, 80, 200):
        assert short_help(name, limit) == command.get_short_help_str(limit)


def test_lazy_group_lists_and_loads_every_command() -> None:
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        assert cli.get_command(ctx, name) is _command(name)
    assert cli.get_command(ctx, "no-such-command") is None


def test_help_shows_every_command_once(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--help")
    listed = res.out.split("Commands:\n", 1)[1].splitlines()
    assert res.code == 0 and [line.split()[0] for line in listed] == sorted(COMMANDS)
    assert "Simulate MoE prefill with expert streaming" in res.out
