#!/usr/bin/env python3
"""Refuse Hexagon programs that qemu-hexagon 7.2 (-cpu v67) cannot execute correctly.

Usage: check_isa.py PROGRAM.elf   (exit 0: accepted; exit 1: refused, one line per reason)

QEMU 7.2 executes scalar Hexagon up to v67 and integer HVX up to v66 bit-exactly; HVX
float/qfloat and everything from HVX v68 on aborts it, and some v73 encodings decode
silently wrong. The compile flags (-mhvx=v66, no -mhvx-qfloat/-mhvx-ieee-fp) already make
clang refuse such intrinsics; this check also covers inline assembly and .S files:

1. disassemble .text with the most permissive decoder (v73, HVX v73, qfloat, IEEE fp),
   because llvm-objdump decodes every known instruction whatever --mattr says;
2. refuse any HVX operand of a floating-point type (.sf .hf .qf16 .qf32 .bf);
3. re-assemble every packet with llvm-mc for exactly what the emulator runs
   (-mcpu=hexagonv67 -mattr=+hvxv66,+hvx-length128b); the assembler, unlike the
   disassembler, checks features, so a packet that assembles only with the permissive
   features uses a newer instruction and is refused;
4. refuse calls inside functions named *_hvx: per-function packet counts of the kernels
   must be complete, so HVX kernels are leaf functions.
Tools come from $OBJDUMP and $LLVM_MC (default llvm-objdump-19, llvm-mc-19).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

PERMISSIVE = ["-mcpu=hexagonv73", "-mattr=+hvxv73,+hvx-length128b,+hvx-qfloat,+hvx-ieee-fp,+audio"]
EMULATOR = ["-mcpu=hexagonv67", "-mattr=+hvxv66,+hvx-length128b"]
FLOAT_TYPE = re.compile(r"\.(sf|hf|qf16|qf32|bf)\b")
FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
INSN = re.compile(r"^\s*(?P<addr>[0-9a-f]+):\s*(?P<text>.*)$")
BRANCH = re.compile(r"\b(jump|call|loop[01]|sp[123]loop0)\b")
HEX = re.compile(r"(?<![#\w-])0x[0-9a-f]+")


def disassemble(path: str) -> list[tuple[str, int, str]]:
    """(function, address, packet text) for every packet of .text."""
    objdump = os.environ.get("OBJDUMP", "llvm-objdump-19")
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", *("-" + f for f in PERMISSIVE), path],
                         capture_output=True, text=True, check=True).stdout
    packets: list[tuple[str, int, str]] = []
    func, start, parts = "?", 0, []
    for line in out.splitlines():
        if m := FUNC.match(line):
            func = m["name"]
            continue
        m = INSN.match(line)
        if not m or not m["text"].strip():
            continue
        text = m["text"].strip()
        if text.startswith("{"):
            start, parts = int(m["addr"], 16), []
            text = text[1:].strip()
        end = "}" in text
        body = text.split("}")[0].strip() if end else text
        if body and not body.startswith("immext("):   # the assembler re-creates immext
            parts.append(body)
        if end:
            tail = text.split("}", 1)[1].strip()       # e.g. ":endloop0"
            packets.append((func, start, "{ " + "; ".join(parts) + " }" + (f" {tail}" if tail else "")))
    return packets


def assemble_errors(lines: list[str], features: list[str]) -> set[int]:
    """Indexes of the lines llvm-mc rejects with these features."""
    llvm_mc = os.environ.get("LLVM_MC", "llvm-mc-19")
    src = "\n".join(lines) + "\n"
    proc = subprocess.run([llvm_mc, "-triple=hexagon", *features, "-filetype=null"],
                          input=src, capture_output=True, text=True, check=False)
    bad = {int(m[1]) - 1 for m in re.finditer(r"<stdin>:(\d+):\d+: error", proc.stderr)}
    if proc.returncode != 0 and not bad:
        raise SystemExit(f"check_isa: {llvm_mc} failed without naming a line: {proc.stderr.strip()[:300]}")
    return {i // 2 for i in bad}   # two source lines per packet: label, packet


def check(path: str) -> list[str]:
    packets = disassemble(path)
    problems = []
    for func, addr, text in packets:
        if m := FLOAT_TYPE.search(text):
            problems.append(f"{func}+{addr:#x}: HVX floating-point type {m[0]} in {text}")
        if func.endswith("_hvx") and re.search(r"\bcall\b|\bcallr\b", text):
            problems.append(f"{func}+{addr:#x}: HVX kernels must be leaf functions, found {text}")
    lines = []
    for i, (_, _, text) in enumerate(packets):
        label = f".Lp{i}"
        text = "; ".join(HEX.sub(label, part) if BRANCH.search(part) else part for part in text.split("; "))
        lines += [f"{label}:", text]
    for i in sorted(assemble_errors(lines, EMULATOR)):
        func, addr, text = packets[i]
        alone = [f".Lp{i}:", lines[2 * i + 1]]
        why = ("needs an instruction newer than scalar v67 / HVX v66"
               if not assemble_errors(alone, PERMISSIVE) else "cannot be re-assembled for checking")
        problems.append(f"{func}+{addr:#x}: {why}: {text}")
    return problems


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    problems = check(sys.argv[1])
    for p in problems:
        print(f"check_isa: {sys.argv[1]}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
