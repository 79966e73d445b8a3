#!/usr/bin/env bash
# Install (Debian 12 "bookworm" packages) and check the toolchain of the native Hexagon reference.
#
#   sudo tools/install_toolchain.sh          install, then check
#   tools/install_toolchain.sh --check       check only (exit 1 naming what is missing)
#
# clang-19 / lld-19 / llvm-19: cross compiler, linker, llvm-objdump-19 / llvm-mc-19 / llvm-nm-19
#   for the ISA check and symbol tables (target hexagon-unknown-linux-musl; no Qualcomm SDK).
# qemu-user: qemu-hexagon 7.2, dynamically linked, so it can load TCG plugins (-plugin);
#   qemu-user-static's qemu-hexagon-static cannot.
# gcc, make: the packet-counting plugin is a host shared object built with gcc.
set -euo pipefail

PACKAGES=(clang-19 lld-19 llvm-19 qemu-user gcc make)
TOOLS=(clang-19 ld.lld-19 llvm-objdump-19 llvm-mc-19 llvm-nm-19 qemu-hexagon gcc make)

if [[ "${1:-}" != "--check" ]]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y --no-install-recommends "${PACKAGES[@]}"
fi

missing=()
for tool in "${TOOLS[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
    echo "missing: ${missing[*]} (apt-get install ${PACKAGES[*]})" >&2
    exit 1
fi
if ! qemu-hexagon -h 2>&1 | grep -q -- '-plugin'; then
    echo "qemu-hexagon has no -plugin option: the packet counts need qemu-user's dynamic build" >&2
    exit 1
fi
clang-19 --version | head -n1
qemu-hexagon --version | head -n1
echo "toolchain ok"
