"""The ``moesim`` command line: argument parsing and output only.

Every error a user can cause is printed as one line on stderr with exit status 2;
``--debug`` (anywhere on the command line) shows the traceback instead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from moesim._version import __version__
from moesim.cli.autoconfig_cmd import autoconfig
from moesim.cli.catalog_cmd import devices, models
from moesim.cli.compare_cmd import compare
from moesim.cli.decode_cmd import decode
from moesim.cli.prefill_cmd import prefill
from moesim.cli.rerun_cmd import rerun
from moesim.cli.specdecode_cmd import specdecode
from moesim.cli.sweep_cmd import plot, sweep
from moesim.cli.validate_cmd import calibrate, validate
from moesim.errors import MoesimError

__all__ = ["cli", "main"]

EXIT_INPUT = 2
EXIT_INTERNAL = 1


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="moesim")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """Simulate and cost Mixture-of-Experts inference hardware."""


cli.add_command(models)
cli.add_command(devices)
cli.add_command(prefill)
cli.add_command(compare)
cli.add_command(rerun)
cli.add_command(autoconfig)
cli.add_command(specdecode)
cli.add_command(decode)
cli.add_command(sweep)
cli.add_command(plot)
cli.add_command(validate)
cli.add_command(calibrate)


def _register_optional() -> None:
    """Command groups that live in their own modules."""
    from moesim.cli.trace_cmd import trace

    cli.add_command(trace)


_register_optional()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status instead of calling ``sys.exit``."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
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
        click.echo(f"moesim: error: {exc}", err=True)
        return EXIT_INPUT
    except Exception as exc:  # a bug: say so in one line, keep the traceback behind --debug
        if debug:
            raise
        click.echo(f"moesim: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
        return EXIT_INTERNAL
    return status if isinstance(status, int) else 0


def entry_point() -> None:
    sys.exit(main())
