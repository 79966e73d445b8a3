"""Name the option the user typed when a run field they set is refused.

The run models and the simulator speak in field names (``memory_budget_GiB``,
``policy.group_size``, ``cache_GiB``); a user typed ``--memory-budget-gib``. When an
:class:`~moesim.errors.InputError` names a field that an option of the command sets, and that
option is on the command line, the error is shown under the option's name. A field the user
did not set (a profile number, a model number, a default) keeps its own name.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from moesim.errors import InputError

__all__ = ["blame_option"]


#: run sections that one option sets as a whole (``--draft-routing nearby:0`` sets routing.window)
_SECTION_OPTIONS = {"routing": "draft_routing", "draft": "draft_mu"}


def _norm(name: str) -> str:
    """``policy.group_size`` -> ``group_size``; ``memory_budget_GiB`` -> ``memory_budget_gib``."""
    return name.rsplit(".", 1)[-1].lower().replace("-", "_")


def _leaf(group: click.Group, args: Sequence[str]) -> click.Command | None:
    """The command ``args`` runs (through nested groups), or None."""
    command: click.Command = group
    words = [a for a in args if not a.startswith("-")]
    ctx = click.Context(group)
    for word in words:
        if not isinstance(command, click.Group):
            break
        sub = command.get_command(ctx, word)
        if sub is None:
            return None
        command = sub
    return None if command is group else command


def blame_option(err: InputError, group: click.Group, args: Sequence[str]) -> InputError:
    """``err`` under the name of the option that set its field, when the user gave that option.

    >>> @click.group()
    ... def g() -> None: ...
    >>> @g.command()
    ... @click.option("--memory-budget-gib", type=float)
    ... def run(memory_budget_gib: float) -> None: ...
    >>> str(blame_option(InputError("memory_budget_GiB", "must be >= 0.5 GiB", 0.1), g,
    ...                  ["run", "--memory-budget-gib", "0.1"]))
    '--memory-budget-gib must be >= 0.5 GiB, got 0.1'
    >>> str(blame_option(InputError("memory_budget_GiB", "must be >= 0.5 GiB", 0.1), g, ["run"]))
    'memory_budget_GiB must be >= 0.5 GiB, got 0.1'
    """
    if err.source or err.field.startswith("-"):
        return err
    command = _leaf(group, args)
    if command is None:
        return err
    typed = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name is None:
            continue
        flags = [o for o in param.opts if o.startswith("--")]
        names = {_norm(param.name), *(_norm(f.lstrip("-")) for f in flags)}
        section = _SECTION_OPTIONS.get(err.field.split(".", 1)[0]) if "." in err.field else None
        if not (flags and typed & set(param.opts)):
            continue
        if _norm(err.field) in names:
            return err.renamed(flags[0])
        if section in names:
            return err.renamed(f"{flags[0]} ({err.field})")
    return err
