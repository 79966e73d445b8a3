"""Write the synthetic logs of validation/logs/ (the round trip of ``moesim calibrate device``):
the bundled phone's own fio and llama-bench measurements as its cost model prices them.

    python validation/synth_device_logs.py

Synthetic: a profile's predictions in the formats a user's tools write, never a measurement.
"""

from __future__ import annotations

from pathlib import Path

from moesim.calibrate.device_synth import fio_json, llama_bench_json
from moesim.config.profiles import phone_profile

HERE = Path(__file__).resolve().parent / "logs"


def main() -> None:
    phone = phone_profile("sd8-elite-gen5")
    (HERE / "synthetic-sd8-elite-gen5-fio.json").write_text(fio_json(phone))
    (HERE / "synthetic-sd8-elite-gen5-llama-bench-cpu.json").write_text(
        llama_bench_json(phone, units=("cpu",), prompts=(128, 512, 2048)))
    print("wrote", HERE)


if __name__ == "__main__":
    main()
