"""DeepSeek-V3.1 with its MTP draft against the EcoSpec paper's Table 3 rows (issue 37 item 2).

No real DeepSeek-V3.1 trace exists: the routing is generated from the model's own statistics
(uniform load, no reuse: ``moesim.traces.synth.MODEL_STATS``, chosen because the paper's MTP E
of 31.4 is above even independent uniform draws). That is a fit to one figure, the MTP row's E;
alpha, T_verify and the speedup of that row, and the whole EcoSpec row, are predictions. The
runtime is h200x8-hf as calibrated (its hf5-fp8-hit-loop path, fitted on the AR and MTP
T_verify at the published E: ``specdecode/path-deepseek-v3.1-*``); the draft is ``--draft mtp``
(the MTP module's published acceptance and decay by depth), the predictor the paper's
converged 80%.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from moesim.config.specdecode import SpecDecodeRun
from moesim.simulate.specdecode import simulate_specdecode
from moesim.validate.registry import Case

__all__ = ["DEEPSEEK_PUBLISHED", "deepseek_rows", "deepseek_cases"]

_SRC = "EcoSpec paper, BRIEF.md section 6b, Table 3: DeepSeek-V3.1 on 8x H200, gamma 4, tree 3 x top-2, T = 0"

#: Table 3, DeepSeek-V3.1 (per step)
DEEPSEEK_PUBLISHED = {"mtp": {"mean_active_experts": 31.4, "t_verify_s": 0.980, "acceptance_length": 2.85,
                              "speedup_vs_ar": 1.10},
                      "ecospec": {"mean_active_experts": 31.2, "t_verify_s": 0.930, "acceptance_length": 2.79,
                                  "speedup_vs_ar": 1.15}}
_TOL = 0.15     # the tolerance for the Table 3 rows, set before these runs
_UNITS = {"mean_active_experts": "experts/layer", "t_verify_s": "s", "acceptance_length": "tokens/step",
          "speedup_vs_ar": "x"}
_SHORT = {"mean_active_experts": "active-experts", "t_verify_s": "t-verify", "acceptance_length": "acceptance",
          "speedup_vs_ar": "speedup"}


@cache
def deepseek_rows() -> dict[str, dict[str, Any]]:
    """moesim's two rows: the MTP draft verified by confidence, and EcoSpec (80% predictor)."""
    base = SpecDecodeRun(model="deepseek-v3.1", device="h200x8-hf", selector="confidence", gamma=4, seed=0,
                         drafter="mtp")     # the published setting; the draft is the MTP module's own
    ecospec = SpecDecodeRun.model_validate({**base.model_dump(), "selector": "ecospec",
                                            "predictor": {"kind": "accuracy", "fraction": 0.80}})
    runs = {"mtp": base, "ecospec": ecospec}
    return {name: simulate_specdecode(run).to_dict() for name, run in runs.items()}


def _predict(row: str, key: str) -> Any:
    return lambda: float(deepseek_rows()[row][key])


def deepseek_cases() -> list[Case]:
    cases = []
    for row, published in DEEPSEEK_PUBLISHED.items():
        for key, ref in published.items():
            fitted = row == "mtp" and key == "mean_active_experts"
            cases.append(Case(
                name=f"specdecode/deepseek-v3.1-{row}-{_SHORT[key]}", reference=ref,
                source=f"{_SRC}: {'MTP' if row == 'mtp' else 'EcoSpec (80% predictor)'} {key} {ref}; moesim: "
                       "--draft mtp on the generated routing of MODEL_STATS (uniform load, no reuse)",
                tolerance=_TOL, tolerance_kind="relative", unit=_UNITS[key], fitted_to=fitted,
                predict=_predict(row, key)))
    return cases
