"""CLI conventions: one-line errors with exit 2, --debug tracebacks, --json everywhere."""

import json
import subprocess
import sys

import click
import pytest

from moesim.cli import cli


def test_every_command_has_json_flag() -> None:
    def walk(cmd, path):  # type: ignore[no-untyped-def]
        if isinstance(cmd, click.Group):            # the top group loads its commands lazily
            if path and cmd.invoke_without_command:   # a group that is also a command (moesim models)
                yield path, cmd
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])
        else:
            yield path, cmd

    commands = list(walk(cli, []))
    names = {" ".join(p) for p, _ in commands}
    for expected in ("models", "devices", "prefill", "autoconfig", "specdecode", "calibrate estream", "validate"):
        assert expected in names
    for path, cmd in commands:
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        assert "--json" in opts, " ".join(path)


def test_usage_error_is_one_line_exit_2(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("models", "--no-such-flag")
    assert res.code == 2 and res.err.count("\n") == 1 and "--no-such-flag" in res.err


def test_debug_shows_traceback(run_cli) -> None:  # type: ignore[no-untyped-def]
    from moesim.errors import InputError

    with pytest.raises(InputError):
        run_cli("--debug", "models", "--model", "nope")


def test_devices_json(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("devices", "--json")
    data = json.loads(res.out)
    assert [d["name"] for d in data["devices"]] == ["b200x8-fused", "h100x8-fused", "h100x8-hf", "h200x8-fused",
                                                    "h200x8-hf", "h20x8-fused", "h20x8-hf", "host", "sd8-elite",
                                                    "sd8-elite-gen5", "sd8-gen3"]
    assert all(len(d["profile_hash"]) == 16 for d in data["devices"])


def test_python_dash_m_and_console_script() -> None:
    out = subprocess.run([sys.executable, "-m", "moesim", "devices", "--device", "nope"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2 and out.stderr.startswith("moesim: error: --device must be")
    assert "Traceback" not in out.stderr


def test_json_is_deterministic(run_cli) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("models", "--json").out == run_cli("models", "--json").out
