"""Every ``moesim`` command the docs name, in prose or in a ``sh`` block, is one that works.

``test_docs_examples.py`` runs the ``console`` blocks and compares their output; this file
covers the rest: commands quoted inline (```moesim compare --tokens 256,4096```) and the lines
of ``sh`` blocks. Each is parsed by the real command line (the command exists, its options and
choices are valid) in the default run, and executed in a temporary folder, where it must exit
0, in the slow run. A command that cannot run here is listed in ``CANNOT_RUN`` with the reason.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from moesim.cli import cli
from moesim.traces import shared_traces_dir

REPO = Path(__file__).resolve().parent.parent
DOC_FILES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "traces").glob("*.md")])
INLINE = re.compile(r"`(moesim [^`]+)`")
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
#: a placeholder (PATH, RESULT.json, [--json], N) marks a synopsis, not a command to run
PLACEHOLDER = re.compile(r"\[|\]|\b[A-Z][A-Z_.]*[A-Z]\b|\bN\b|\bM\b|\bS\b")

#: documented commands that cannot run on a lone test machine, and why
CANNOT_RUN = {
    "moesim sweep docs/examples/sweep-2gib.toml -o results.parquet --scheduler tcp://hostA:8786":
        "needs a Dask cluster on hostA",
    "moesim calibrate host": "re-measures this machine's CPU for minutes and rewrites its profile",
    "moesim calibrate estream": "rewrites the bundled phone profile",
    "moesim validate --only host/ --remeasure": "re-measures this machine's CPU (minutes)",
    "moesim models import Qwen3-30B-A3B-Q4_K_M.gguf -o qwen3-30b-q4km.toml":
        "reads an 18 GB GGUF the user downloads; tests/unit/test_gguf_import.py writes small GGUFs with gguf's writer",
    "moesim validate": "runs every validation case (minutes): tests/unit/test_validate.py runs it (slow)",
}


def _sh_commands(text: str) -> Iterator[str]:
    """The ``moesim`` lines of a doc's ``sh`` blocks, with the block's variables expanded
    (``S=../shared/traces`` is a path from the repository root)."""
    for block in SH_BLOCK.findall(text):
        variables: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if m := re.fullmatch(r"([A-Za-z_]\w*)=(\S+)", line):
                variables[m[1]] = str((REPO / m[2]).resolve()) if "/" in m[2] else m[2]
            elif line.startswith("moesim "):
                for name, value in variables.items():
                    line = line.replace(f"${name}", value)
                yield line.split(" | ")[0].strip()


def documented_commands() -> list[tuple[str, str]]:
    """(doc name, command) for every command the docs quote, in the order of each doc, first
    mention kept (a ``sh`` block's commands may use the files its earlier lines wrote)."""
    seen: dict[str, str] = {}
    for path in DOC_FILES:
        text = path.read_text()
        for command in [*_sh_commands(text), *(c.split(" | ")[0] for c in INLINE.findall(text))]:
            command = " ".join(command.split())
            if not PLACEHOLDER.search(command.removeprefix("moesim ")):
                seen.setdefault(command, path.relative_to(REPO).as_posix())
    return [(doc, cmd) for cmd, doc in seen.items()]


COMMANDS = documented_commands()


def test_docs_quote_commands() -> None:
    """The collector finds the README's commands (it would silently find none if it broke)."""
    found = {cmd for _, cmd in COMMANDS}
    assert {"moesim compare --tokens 256,4096", "moesim autoconfig --memory-budget-gib 0.7 --verify"} <= found
    assert len(COMMANDS) >= 15


def _parse(argv: list[str]) -> bool:
    """Parse ``argv`` down to the leaf command, as the CLI would, without running it; False
    when it names a command or an option without the arguments it needs (a reference in prose,
    such as "see `moesim sweep`"), True when it is a whole command."""
    try:
        _parse_leaf(argv)
    except (click.MissingParameter, click.exceptions.NoArgsIsHelpError):
        return False
    except click.exceptions.Exit as exc:      # --help, --version: whole commands
        return exc.exit_code == 0
    except click.BadOptionUsage as exc:
        if "requires an argument" in exc.format_message() and argv[-1].startswith("--"):
            return False
        raise
    return True


def _parse_leaf(argv: list[str]) -> None:
    ctx = cli.make_context("moesim", list(argv))
    command: click.Command = cli
    args = [*ctx._protected_args, *ctx.args]
    while isinstance(command, click.Group) and args:
        name, sub, rest = command.resolve_command(ctx, args)
        assert sub is not None and name is not None, f"no command {args[0]!r}"
        ctx = sub.make_context(name, rest, parent=ctx)
        command, args = sub, [*ctx._protected_args, *ctx.args]


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_documented_command_parses(doc: str, command: str, tmp_path: Path) -> None:
    if str(shared_traces_dir().resolve()) in command and not shared_traces_dir().is_dir():
        pytest.skip(f"{doc}: {command!r} reads {shared_traces_dir()}, not found")
    argv = shlex.split(command.partition(" > ")[0])[1:]
    for token in argv:            # output options are checked against the folder they name
        if "/" in token and not token.startswith(("/", "-", "docs/")):
            (tmp_path / token).parent.mkdir(parents=True, exist_ok=True)
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert _parse(argv) or not command.startswith("moesim -"), f"{doc}: {command!r} exits non-zero"
    except click.ClickException as exc:
        pytest.fail(f"{doc}: {command!r} is refused by the command line: {exc.format_message()}")
    finally:
        os.chdir(cwd)


DOCS = sorted({doc for doc, _ in COMMANDS})


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS)
def test_documented_commands_run(doc: str, tmp_path: Path, run_cli: Callable[..., Any],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A doc's commands, in its order, in one temporary folder: each exits 0."""
    if not shared_traces_dir().is_dir():
        pytest.skip(f"{shared_traces_dir()} not found: documented commands replay the real traces")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").symlink_to(REPO / "docs")         # commands quote repository paths
    for command in [c for d, c in COMMANDS if d == doc]:
        command, _, redirect = command.partition(" > ")
        argv = shlex.split(command)[1:]
        for token in argv:
            if "/" in token and not token.startswith(("/", "-", "docs/")):
                (tmp_path / token).parent.mkdir(parents=True, exist_ok=True)
        if command in CANNOT_RUN or not _parse(argv):
            continue
        res = run_cli(*argv, *(["--quiet"] if _takes_quiet(argv) else []))
        assert res.code == 0, f"{doc}: {command!r} exits {res.code}: {res.err.strip()[-400:]}"
        if redirect:
            Path(redirect.strip()).write_text(res.out)


def _takes_quiet(argv: list[str]) -> bool:
    if not argv or "--help" in argv:
        return False
    sub = cli.get_command(click.Context(cli), argv[0])
    return sub is not None and not isinstance(sub, click.Group) and any(
        "--quiet" in getattr(p, "opts", []) for p in sub.params)


def test_one_value_for_the_30_percent_slower_ufs_what_if() -> None:
    """Every page that asks "what if UFS were 30% slower" sets the same number: 70% of the
    bundled profile's effective read rate, to the two decimals the pages print."""
    from moesim.config.profiles import load_profile

    base = float(load_profile("sd8-elite-gen5").ufs.effective_read_bw_GBps)  # type: ignore[union-attr,arg-type]
    want = round(0.7 * base, 2)
    pages = [p for p in DOC_FILES if "30% slower" in p.read_text()]
    assert pages
    for path in pages:
        text = path.read_text()
        values = [float(v) for v in re.findall(r"ufs\.effective_read_bw_GBps\s*=\s*\[?([\d.]+)", text)]
        values += [float(v) for v in re.findall(r"ufs\.effective_read_bw_GBps\s*=\s*\[[\d.]+,\s*([\d.]+)", text)]
        near = [v for v in values if 0.6 * base <= v <= 0.8 * base]
        assert near and all(v == want for v in near), f"{path.name}: 30% slower UFS is {near}, want {want}"
