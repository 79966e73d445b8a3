"""The ``moesim`` command line: argument parsing and output only.

Every error a user can cause is printed as one line on stderr with exit status 2;
``--debug`` (anywhere on the command line) shows the traceback instead. Commands are
imported only when they run (``moesim --version`` and ``--help`` load no simulator code):
:data:`COMMANDS` names each command's module and the short help shown by ``moesim --help``,
which a test holds equal to the command's own.
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Sequence

import click

from moesim._version import __version__
from moesim.errors import InputError, MoesimError, deprecations_shown

__all__ = ["cli", "main", "COMMANDS"]

EXIT_INPUT = 2
EXIT_INTERNAL = 1
EXIT_PIPE = 141          # 128 + SIGPIPE, what a shell reports for a reader that stopped early

#: command name -> (module under moesim.cli, attribute, short help for ``moesim --help``)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "autoconfig": ("autoconfig_cmd", "autoconfig",
                   "Choose group size, bank count and queue depth under a memory budget (max-plus search)."),
    "calibrate": ("validate_cmd", "calibrate",
                  "Fit device-profile numbers to published figures or native measurements."),
    "compare": ("compare_cmd", "compare",
                "Compare prefill policies (EStream and the baselines) in one table: TTFT, tokens/s, peak memory, "
                "bubble, energy, and speedup, memory and energy ratios against --baseline (above 1 = better)."),
    "decode": ("decode_cmd", "decode",
               "Simulate decode on a phone: an expert cache in DRAM, misses read from UFS, optional speculation."),
    "devices": ("catalog_cmd", "devices", "List device profiles, or validate and show one with --device."),
    "models": ("catalog_cmd", "models", "List the model catalog with computed expert and resident bytes."),
    "plot": ("sweep_cmd", "plot",
             "Plot sweep results: a metric against an input, or the latency-memory trade-off."),
    "prefill": ("prefill_cmd", "prefill",
                "Simulate MoE prefill with expert streaming (EStream) or a baseline policy."),
    "rerun": ("rerun_cmd", "rerun",
              "Re-run a saved --json result (prefill, specdecode or decode) from the configuration it carries."),
    "specdecode": ("specdecode_cmd", "specdecode",
                   "Simulate speculative decoding with draft trees and a selection rule (EcoSpec), batch 1 or more."),
    "sweep": ("sweep_cmd", "sweep",
              "Run every point of a grid of prefill, specdecode or decode runs into a Parquet table."),
    "trace": ("trace_cmd", "trace",
              "Routing traces: import third-party logs, statistics, prompt assembly, synthetic traces."),
    "validate": ("validate_cmd", "validate",
                 "Run every validation case this machine can run; report the others as skipped with the reason."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported from :data:`COMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attr, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(f"moesim.cli.{module}"), attr)
            assert isinstance(command, click.Command), cmd_name
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the stored short help, without importing any command."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, short_help(name, limit) if name in COMMANDS else self.commands[name].get_short_help_str(limit))
                for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def short_help(name: str, limit: int) -> str:
    """What ``moesim --help`` shows for ``name``, cut to ``limit`` characters like click does.

    A bare command carrying the stored help does the cutting, so the rule is click's own in every
    release (``click.utils.make_default_short_help`` is deprecated from click 8.2 on).
    """
    return click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="moesim")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """Simulate and cost Mixture-of-Experts inference hardware."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status instead of calling ``sys.exit``."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    deprecations_shown().clear()   # each command says once what it used that is deprecated
    try:
        status = cli.main(args=args, prog_name="moesim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("moesim: aborted", err=True)
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        click.echo(f"moesim: error: {exc.format_message()}", err=True)
        return EXIT_INPUT if isinstance(exc, click.UsageError) else exc.exit_code
    except MoesimError as exc:
        if debug:
            raise
        if isinstance(exc, InputError):
            from moesim.cli.blame import blame_option

            exc = blame_option(exc, cli, args)
        click.echo(f"moesim: error: {exc}", err=True)
        return EXIT_INPUT
    except BrokenPipeError:      # the reader went away (`moesim ... | head`): stop quietly, as SIGPIPE would
        _silence_stdout()
        return EXIT_PIPE
    except Exception as exc:  # a bug: say so in one line, keep the traceback behind --debug
        if debug:
            raise
        click.echo(f"moesim: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
        return EXIT_INTERNAL
    return status if isinstance(status, int) else 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def entry_point() -> None:
    sys.exit(main())
