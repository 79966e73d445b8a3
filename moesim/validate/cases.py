"""Every registered validation case, in a stable order."""

from __future__ import annotations

from moesim.validate.registry import Case

__all__ = ["registry"]


def registry() -> list[Case]:
    """Every registered case, in a stable order."""
    from moesim.validate.cpu_moe import cpu_moe_cases
    from moesim.validate.decode import decode_cases
    from moesim.validate.estream import estream_cases
    from moesim.validate.gpu_devices import gpu_device_cases
    from moesim.validate.hexagon import hexagon_cases
    from moesim.validate.host import host_cases
    from moesim.validate.phones import phone_cases
    from moesim.validate.specdecode import specdecode_cases

    return [*estream_cases(), *host_cases(), *hexagon_cases(), *specdecode_cases(), *decode_cases(),
            *phone_cases(), *cpu_moe_cases(), *gpu_device_cases()]
