"""Regenerate the console examples of docs/cli.md, docs/tutorial-prefill.md, docs/tutorial-decode.md and
docs/tutorial-devices.md from real runs.

    python docs/gen_examples.py

The test suite executes every example and compares its output, so a change in behaviour
shows up as a test failure until this script is rerun (and the change reviewed).
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

from moesim.cli import main

HERE = Path(__file__).resolve().parent
MARK = "<!-- requires shared traces -->\n"


def run(command: str, shared: bool = False) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(shlex.split(command)[1:])
    text = "\n".join(line.rstrip() for line in (out.getvalue() + err.getvalue()).rstrip("\n").splitlines())
    return (MARK if shared else "") + f"```console\n$ {command}\n{text}\n```"


def render(template: str) -> str:
    """Replace every ``{{$ command}}`` (or ``{{shared$ command}}``) line by its console block."""
    lines = []
    for line in template.splitlines():
        if line.startswith("{{") and line.endswith("}}"):
            body = line[2:-2]
            shared = body.startswith("shared")
            lines.append(run(body.removeprefix("shared").removeprefix("$ "), shared))
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


#: the fitted phone the devices tutorial compares, refitted first so that it follows its base profile
FITTED_EXAMPLE = ("moesim calibrate device s26plus --llama-bench "
                  "validation/logs/llamacpp-pr23368-s26plus-htp0-qwen3-4b.md "
                  "--out docs/examples/s26plus-fitted.toml --force")


def main_() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        main(shlex.split(FITTED_EXAMPLE)[1:])
    print("wrote", HERE / "examples" / "s26plus-fitted.toml")
    for name in ("cli", "tutorial-prefill", "tutorial-decode", "tutorial-devices"):
        template = (HERE / "templates" / f"{name}.md").read_text()
        (HERE / f"{name}.md").write_text(render(template))
        print("wrote", HERE / f"{name}.md")


if __name__ == "__main__":
    main_()
