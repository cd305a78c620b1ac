"""Presets: the YAML files of named configurations that ``synbench train FAMILY --preset P`` composes.

A family's model presets live in ``presets/FAMILY.yaml`` beside its adapter; a preset may start from another
(``extends``) and name the shared data/train preset it trains with (``train_preset``, else the one of its own
name in ``configs/train.yaml``). Read with ``yaml.safe_load``; every error names its ``FILE:LINE``. Nothing here
knows the family registry, so adapters and the config resolution both read presets without a cycle.
"""

from __future__ import annotations

import copy
import inspect
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from lightning_modules.errors import InputError


def configs_dir() -> Path:
    """The shipped ``experiments/configs`` folder."""
    return Path(str(resources.files("experiments") / "configs"))


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping with ``yaml.safe_load``; errors carry ``FILE:LINE``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read config: {e.strerror}", str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"invalid YAML: {getattr(e, 'problem', e)}", f"{path}{line}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("a config file must be a YAML mapping", f"{path}:1")
    return data


PRESET_KEYS = ("extends", "train_preset")  # keys of a model preset that are not model settings


def presets_file(adapter: Any) -> Path:
    """Where a family adapter's model presets live by default: ``presets/NAME.yaml`` beside its module
    (``experiments/families/tg/presets/txl-trees.yaml``; a plug-in's beside the plug-in's module)."""
    return Path(inspect.getfile(type(adapter))).parent / "presets" / f"{adapter.name}.yaml"


def _key_line(path: Path, preset: str, key: str | None = None) -> str:
    """``FILE:LINE`` of ``preset`` (or of its ``key``) in a presets file, for messages (``FILE`` if not found)."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return str(path)
    for name, value in getattr(root, "value", []) if isinstance(root, yaml.MappingNode) else []:
        if name.value == preset:
            mark = name.start_mark
            for k, _ in value.value if key is not None and isinstance(value, yaml.MappingNode) else []:
                if k.value == key:
                    mark = k.start_mark
            return f"{path}:{mark.line + 1}"
    return str(path)


def _resolve_preset(path: Path, name: str, files: dict[Path, dict[str, Any]],
                    chain: tuple[tuple[Path, str], ...] = ()) -> dict[str, Any]:
    """Preset ``name`` of presets file ``path`` with its ``extends`` chain applied (``files``: read files)."""
    if path not in files:
        files[path] = load_yaml(path)
    preset = files[path][name]
    if not isinstance(preset, dict):
        raise InputError(f"{name}: a preset must be a mapping of settings", _key_line(path, name))
    target = preset.get("extends")
    own = {k: v for k, v in preset.items() if k != "extends"}
    if target is None:
        return copy.deepcopy(own)
    where = _key_line(path, name, "extends")
    if not isinstance(target, str) or not target.strip(":"):
        raise InputError(f"{name}.extends: expected PRESET or FILE:PRESET, got {target!r}", where)
    stem, sep, base = target.rpartition(":")
    base_path = path.with_name(f"{stem}.yaml") if sep else path
    if not base_path.is_file():
        raise InputError(f"{name}.extends: no presets file {base_path.name} beside {path.name}", where)
    if base_path not in files:
        files[base_path] = load_yaml(base_path)
    if base not in files[base_path]:
        known = ", ".join(files[base_path]) or "none"
        raise InputError(f"{name}.extends: no preset {base!r} in {base_path.name} (known: {known})", where)
    link = (path, name)
    if (base_path, base) in (*chain, link):
        cycle = " -> ".join(f"{p.stem}:{n}" for p, n in (*chain, link, (base_path, base)))
        raise InputError(f"{name}.extends: a cycle ({cycle})", where)
    return merge(_resolve_preset(base_path, base, files, (*chain, link)), own)


def resolve_presets(path: Path) -> dict[str, dict[str, Any]]:
    """Every preset of a presets file with ``extends`` resolved, ``train_preset`` kept.

    ``extends: NAME`` starts a preset from preset NAME of the same file, ``extends: FILE:NAME`` from preset
    NAME of ``FILE.yaml`` in the same folder (``extends: pushdown:bllip``); the preset's own keys then replace
    the base's (a deep merge; keys keep the base's order). Chains are followed; a cycle, an unknown file or an
    unknown preset is an error at the ``extends`` line.
    """
    path = Path(path)
    files: dict[Path, dict[str, Any]] = {}
    return {name: _resolve_preset(path, name, files) for name in load_yaml(path)}


def load_presets(path: Path) -> dict[str, dict[str, Any]]:
    """The model presets of a presets file: ``extends`` resolved (``resolve_presets``), ``train_preset`` left
    out (it picks the data/train preset, ``train_presets_for``)."""
    return {name: {k: v for k, v in preset.items() if k not in PRESET_KEYS}
            for name, preset in resolve_presets(path).items()}


def train_presets_for(path: Path, shared: dict[str, Any]) -> dict[str, Any]:
    """The data/train preset of each model preset of presets file ``path``, by model preset name, and the
    ``runtime`` defaults: the preset of ``shared`` (``configs/train.yaml``) that the model preset's
    ``train_preset`` names (inherited through ``extends``), else the one of its own name; a model preset with
    neither is not trainable (``model-info`` only). Without the file (presets kept in code): ``shared``."""
    path = Path(path)
    if not path.is_file():
        return shared
    out: dict[str, Any] = {"runtime": shared["runtime"]}
    for name, preset in resolve_presets(path).items():
        choice = preset.get("train_preset", name)
        if choice in shared and choice != "runtime":
            out[name] = copy.deepcopy(shared[choice])
        elif "train_preset" in preset:
            known = ", ".join(k for k in shared if k != "runtime")
            raise InputError(f"{name}.train_preset: no data/train preset {choice!r} in train.yaml (known: {known})",
                             _key_line(path, name, "train_preset"))
    return out


def merge(base: dict[str, Any], update: dict[str, Any], strict: bool = False, prefix: str = "") -> dict[str, Any]:
    """Deep-merge ``update`` into a copy of ``base``; with ``strict`` unknown keys are an error."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        path = f"{prefix}{key}"
        if strict and key not in out:
            raise InputError(f"unknown config key (known here: {', '.join(sorted(out)) or 'none'})", path)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value, strict, prefix=f"{path}.")
        else:
            out[key] = copy.deepcopy(value)
    return out
