"""The ``moesim`` command line: argument parsing and output only.

Every error a user can cause is printed as one line on stderr with exit status 2;
``--debug`` (anywhere on the command line) shows the traceback instead. Commands are
imported only when they run (``moesim --version`` and ``--help`` load no simulator code):
:data:`COMMANDS` names each command's module and the short help shown by ``moesim --help``,
which a test holds equal to the command's own.
"""

from __future__ import annotations

import errno
import importlib
import io
import os
import select
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from moesim._version import __version__
from moesim.errors import InputError, MoesimError, StdoutError, deprecations_shown

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["cli", "main", "COMMANDS"]

EXIT_INPUT = 2
EXIT_INTERNAL = 1
EXIT_PIPE = 141          # 128 + SIGPIPE, what a shell reports for a reader that stopped early
EXIT_STDOUT = 2          # standard output closed or full: the caller's setup, like a bad option
_INTERNAL_CHARS = 500    # of an internal error's message: one line, even for a 5,000-character path

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
    "require": ("require_cmd", "require",
                "The least value of a hardware resource that meets a TTFT or tokens/s target, the rest fixed."),
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
    """Run the CLI; return the exit status instead of calling ``sys.exit``.

    Standard output is written through :class:`_Stdout` while the command runs and flushed
    before this returns, so that a write that fails (a full disk or ``/dev/full``, a reader that
    went away) is reported here, wherever it happens: in a command, in ``--help``, or at the
    last flush. A closed standard output is refused before the command runs."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    deprecations_shown().clear()   # each command says once what it used that is deprecated
    if sys.stdout is None:         # the interpreter found file descriptor 1 closed (``moesim ... >&-``)
        return _stdout_failed(StdoutError("it is closed (nothing written would be seen)"))
    with _guarded_stdout():
        try:
            status = _run(args, debug)
            sys.stdout.flush()
        except StdoutError as exc:
            if debug:
                raise
            return _stdout_failed(exc)
    return status


def _run(args: list[str], debug: bool) -> int:
    try:
        status = cli.main(args=args, prog_name="moesim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        _say("moesim: aborted")
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        _say(f"moesim: error: {exc.format_message()}")
        return EXIT_INPUT if isinstance(exc, click.UsageError) else exc.exit_code
    except StdoutError:
        raise
    except MoesimError as exc:
        if debug:
            raise
        if isinstance(exc, InputError):
            from moesim.cli.blame import blame_option

            exc = blame_option(exc, cli, args)
        _say(f"moesim: error: {exc}")
        return EXIT_INPUT
    except BrokenPipeError:      # stderr's reader went away (`moesim ... 2>&1 | head`): stop quietly, as SIGPIPE would
        _silence_stdout()
        return EXIT_PIPE
    except Exception as exc:  # a bug: say so in one line, keep the traceback behind --debug
        if debug:
            raise
        text = " ".join(str(exc).split())
        _say(f"moesim: internal error: {type(exc).__name__}: {text[:_INTERNAL_CHARS]} (rerun with --debug)")
        return EXIT_INTERNAL
    return status if isinstance(status, int) else 0


def _stdout_failed(exc: StdoutError) -> int:
    """A reader that went away ends the command quietly with 141; anything else is one line, exit 2."""
    _silence_stdout()
    if exc.errno == errno.EPIPE:
        return EXIT_PIPE
    _say(f"moesim: error: {exc}")
    return EXIT_STDOUT


def _say(line: str) -> None:
    """One line on stderr; a stderr that cannot be written either is left at that."""
    try:
        click.echo(line, err=True)
    except OSError:
        pass


class _Stdout(io.RawIOBase):
    """File descriptor 1 under ``sys.stdout`` while a command runs: a write that fails raises
    :class:`StdoutError` (after which everything is dropped, so no later flush fails again);
    a descriptor left non-blocking by the caller is waited on, not failed."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.dropping = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: ReadableBuffer) -> int:
        view = memoryview(data)
        while not self.dropping:
            try:
                return os.write(self._fd, view)
            except BlockingIOError:
                select.select([], [self._fd], [])
            except OSError as exc:
                self.dropping = True
                raise StdoutError(exc) from None
        return view.nbytes


@contextmanager
def _guarded_stdout() -> Iterator[None]:
    """``sys.stdout`` through :class:`_Stdout` (with the same encoding and buffering) while the
    block runs, when it is this process's own standard output (a test's capture is left alone)."""
    original = sys.stdout
    try:
        own = original is sys.__stdout__ and original is not None and original.fileno() >= 0
    except (OSError, ValueError, io.UnsupportedOperation):
        own = False
    if not own:
        yield
        return
    original.flush()
    raw = _Stdout(original.fileno())
    stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding=original.encoding, errors=original.errors,
                              line_buffering=bool(original.line_buffering),
                              write_through=getattr(original, "write_through", False))
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = original
        try:
            stream.flush()          # what an error path left unwritten; its failure was not the error
        except StdoutError:
            pass
        raw.dropping = True
        stream.close()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())      # a test's capture has none: left alone
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def entry_point() -> None:
    sys.exit(main())
