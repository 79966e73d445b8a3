"""Sub-commands whose workloads are still being built; each names its tracking issue.

They exist so the command tree is stable for scripts; running one says plainly that the
capability is not available yet and exits with status 3 (not 0: nothing was computed).
"""

from __future__ import annotations

import click

__all__ = ["PENDING", "EXIT_NOT_AVAILABLE"]

EXIT_NOT_AVAILABLE = 3

_PLANNED = {
    "specdecode": ("Simulate speculative decoding of an MoE on GPUs (EcoSpec).", 7),
}


def _make(name: str, summary: str, issue: int) -> click.Command:
    @click.command(name=name, help=f"{summary} (not available yet: issue #{issue})",
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def command(as_json: bool) -> None:
        click.echo(f"moesim {name}: not available yet (tracked in issue #{issue}); nothing was computed",
                   err=True)
        raise click.exceptions.Exit(EXIT_NOT_AVAILABLE)

    return command


PENDING: list[click.Command] = [_make(n, s, i) for n, (s, i) in _PLANNED.items()]
