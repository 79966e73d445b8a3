"""The model catalog: one TOML file per model in ``moesim/config/models/``.

Models are data, like device profiles: a user can pass ``--model path/to/model.toml``
wherever a model is taken, and the same schema and checks apply.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from moesim.errors import InputError
from moesim.config.loading import read_toml, validate_data
from moesim.config.model import ModelSpec

__all__ = ["CATALOG_DIR", "model_names", "load_model", "list_models"]

CATALOG_DIR = Path(__file__).parent / "models"


def model_names() -> list[str]:
    """Names of the bundled models, sorted."""
    return sorted(p.stem for p in CATALOG_DIR.glob("*.toml"))


def _read(path: Path) -> ModelSpec:
    data = read_toml(path)
    return validate_data(ModelSpec, data, source=str(path))


@cache
def _bundled(name: str) -> ModelSpec:
    spec = _read(CATALOG_DIR / f"{name}.toml")
    assert spec.name == name, f"{name}.toml declares name {spec.name!r}"
    return spec


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A bundled model by name, or a model TOML file by path.

    >>> load_model("olmoe-1b-7b").expert_bytes("q4_0")
    3538944
    """
    text = str(name_or_path)
    if text in model_names():
        return _bundled(text)
    path = Path(text)
    if path.suffix == ".toml" or path.exists():
        return _read(path)
    raise InputError("model", f"must be a catalog name ({', '.join(model_names())}) or a .toml file", text)


def list_models() -> list[ModelSpec]:
    """Every bundled model, sorted by name."""
    return [_bundled(n) for n in model_names()]
