"""The model catalog: one TOML file per model in ``moesim/config/models/``.

Models are data, like device profiles: a user can pass ``--model path/to/model.toml``
wherever a model is taken, and the same schema and checks apply.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from moesim.config.loading import bundled_or_path, check_own_name, read_toml, validate_data
from moesim.config.model import ModelSpec
from moesim.errors import InputError
from moesim.inputs import exists

__all__ = ["CATALOG_DIR", "DEFAULT_MODEL", "DEFAULT_PHONE_DEVICE", "DEFAULT_GPU_MODEL", "DEFAULT_GPU_DEVICE",
           "DEFAULT_DECODE_MODEL", "model_names", "load_model", "list_models"]

CATALOG_DIR = Path(__file__).parent / "models"

#: What a run uses when no model or device is named: the prefill workload (``moesim prefill``,
#: ``autoconfig``, prefill sweeps) runs OLMoE-1B-7B on the Snapdragon phone profile ...
DEFAULT_MODEL = "olmoe-1b-7b"
DEFAULT_PHONE_DEVICE = "sd8-elite-gen5"
#: ... and speculative decoding (``moesim specdecode``, its sweeps) gpt-oss-120b on 8 H200s.
DEFAULT_GPU_MODEL = "gpt-oss-120b"
DEFAULT_GPU_DEVICE = "h200x8-hf"
#: ... and phone decode (``moesim decode``, its sweeps) Mixtral-8x7B on the phone profile.
DEFAULT_DECODE_MODEL = "mixtral-8x7b"


def model_names() -> list[str]:
    """Names of the bundled models, sorted."""
    return sorted(p.stem for p in CATALOG_DIR.glob("*.toml"))


def _read(path: Path) -> ModelSpec:
    data = read_toml(path, "model")
    return validate_data(ModelSpec, data, source=str(path))


@cache
def _bundled(name: str) -> ModelSpec:
    model = _read(CATALOG_DIR / f"{name}.toml")
    assert model.name == name, f"{name}.toml declares name {model.name!r}"
    return model


def _import_json(path: Path) -> ModelSpec:
    from moesim.config.hf_import import model_from_hf_config, model_name_from, read_hf_config

    return model_from_hf_config(read_hf_config(path, "model"), name=model_name_from(path), source=str(path))


def _import_gguf(path: Path) -> ModelSpec:
    from moesim.config.gguf_import import model_from_gguf

    return model_from_gguf(path, flag="model").model


#: file suffix -> importer, for ``--model path/to/config.json`` and ``--model model.gguf``
_IMPORTED: dict[str, Callable[[Path], ModelSpec]] = {".json": _import_json, ".gguf": _import_gguf}


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A bundled model by name, or a model TOML file by path; a Hugging Face ``config.json`` (a
    path ending in ``.json``) or a GGUF file (``.gguf``) is imported with the importer's defaults.

    >>> load_model("olmoe-1b-7b").expert_bytes("q4_0")
    3538944
    """
    names = model_names()
    path = bundled_or_path(name_or_path, names, "model",
                           f"a catalog model ({', '.join(names)}) or a .toml, .json or .gguf file")
    if isinstance(path, str):
        return _bundled(path)
    if path.suffix in _IMPORTED:            # imported in memory, as ``moesim models import`` would write it
        model = _IMPORTED[path.suffix](path)
        check_own_name(model.name, path, CATALOG_DIR, "model")
        return model
    if path.suffix == ".toml" or exists(path):
        model = _read(path)
        check_own_name(model.name, path, CATALOG_DIR, "model")
        return model
    raise InputError("model", f"must be a catalog name ({', '.join(names)}) or a .toml, .json or .gguf file",
                     str(name_or_path))


def list_models() -> list[ModelSpec]:
    """Every bundled model, sorted by name."""
    return [_bundled(n) for n in model_names()]
