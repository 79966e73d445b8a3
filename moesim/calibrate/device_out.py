"""Write the profile ``moesim calibrate device`` fitted: the base profile's TOML with the fitted
numbers set, each with a provenance note naming its files, bounds, residuals and interval.

Every other number keeps the base's value and note (the header says so). The file is written
atomically once it loads as a profile (:func:`moesim.config.profiles.write_profile`).

A failed fit (:attr:`moesim.calibrate.device_fit.DeviceFit.problems`) is written only with
``--force``, and says so: in the header, the description and the note of every number of a group
that failed (``fitted: FAILED FIT (written with --force; ...)``).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit

from moesim.calibrate.device_fit import DeviceFit, GroupFit
from moesim.config.profiles import write_profile

__all__ = ["render_profile", "write_fitted_profile", "field_note"]


def _table(doc: Any, dotted: str) -> MutableMapping[str, Any]:
    node = doc
    for part in dotted.split("."):
        node = node[part]
    assert isinstance(node, MutableMapping)
    return node


def field_note(group: GroupFit, field: str, files: str) -> str:
    """The provenance of one fitted number (marked when its group's fit failed)."""
    spec = next(s for s in group.fields if s.field == field)
    used = [f for f in group.figures if f.used]
    held = [f for f in group.figures if not f.used]
    errors = ", ".join(f"{f.name} {f.error:+.3f}" for f in used)
    interval = group.intervals[field]
    band = (f"90% interval [{interval[0]:.4g}, {interval[1]:.4g}] ({group.dof} degrees of freedom)" if interval
            else "no interval (as many figures as fitted numbers)")
    checks = f"; held out: {', '.join(f'{f.name} {f.error:+.3f}' for f in held)}" if held else ""
    at = " AT A BOUND (the fit failed: a mechanism or the base is wrong for this device)" \
        if field in group.at_bound else ""
    failed = f"FAILED FIT (written with --force; {'; '.join(group.problems)}): " if group.problems else ""
    return (f"fitted: {failed}from {files}: bounded least squares on ln(predicted/measured) in "
            f"[{spec.low:g}, {spec.high:g}] ({spec.why}) to {len(used)} figures (moesim calibrate device, group "
            f"{group.group}); errors: {errors}{checks}; {band}{at}")


def _rounded(value: float, low: float, high: float) -> float:
    """``value`` to six decimals, never rounded past its bounds."""
    return min(max(round(float(value), 6), low), high)


def render_profile(base_text: str, base_name: str, name: str, fit: DeviceFit, files: dict[str, str]) -> str:
    """The fitted profile as TOML text. ``files`` maps each group to the files its figures came from."""
    lines = base_text.splitlines()
    while lines and (lines[0].startswith("#") or not lines[0].strip()):      # the base's own header comment
        lines.pop(0)
    doc = tomlkit.parse("\n".join(lines) + "\n")
    fitted = ", ".join(sorted(files.values()))
    doc["name"] = name
    doc["display_name"] = f"{name} (fitted from {fitted}; base {base_name})"
    failed = [g.group for g in fit.groups if g.problems]
    mark = (f"FAILED FIT of {', '.join(failed)} (written with --force: the logs are not explained within the "
            "physical bounds; see each fitted number's note)") if failed else ""
    doc["description"] = (f"moesim calibrate device on base {base_name}: {len(fit.values)} numbers fitted"
                          + (f"; {mark}" if mark else ""))
    for group in fit.groups:
        for spec in group.fields:
            section, _, key = spec.field.rpartition(".")
            _table(doc, section)[key] = _rounded(group.values[spec.field], spec.low, spec.high)
            _table(doc, f"{section}.provenance")[key] = field_note(group, spec.field, files[group.group])
    header = (f"# {name}: fitted by `moesim calibrate device` from {fitted}.\n"
              + (f"# {mark}.\n" if mark else "")
              + f"# Derived from the bundled profile {base_name}: every number not fitted here is the base's,\n"
              "# with the base's provenance note (it describes the base device; check it holds for yours).\n")
    text = header + tomlkit.dumps(doc)
    return text if text.endswith("\n") else text + "\n"


def write_fitted_profile(text: str, path: Path) -> Path:
    """Write ``text`` to ``path`` atomically once it loads as a profile (never through a non-regular file)."""
    return write_profile(text, path)
