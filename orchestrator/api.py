"""The Python API: the same search and training the CLI runs.

    from orchestrator import SearchSpec, run_search
    result = run_search(SearchSpec(num_trials=8, epochs=3, time_weight=0.05))
    result.trials        # every trial, a pandas DataFrame, best first
    result.best_config   # the winner's full TrialConfig as a dict
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import yaml

from orchestrator.errors import InputError
from orchestrator.result import SearchResult
from orchestrator.search import run_search
from orchestrator.spec import SearchSpec, WorkloadName
from trainables.config import TrialConfig


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A best_config.json written by a search ({"name", "data", "config"}), or a flat YAML/JSON
    mapping of trial settings. Loaded as plain data only."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"config file {path} does not exist")
    try:
        raw = json.loads(path.read_text()) if path.suffix == ".json" \
            else yaml.safe_load(path.read_text())
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise InputError(f"config file {path} is malformed: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise InputError(f"config file {path} must hold a mapping")
    if "config" in raw:
        return raw
    return {"name": path.stem, "data": None, "config": raw}


def train_config(path: str | Path, *, name: str | None = None, data: str | None = None,
                 epochs: int | None = None, output_dir: str | None = None,
                 tracking_uri: str | None = None, **spec_options: Any) -> SearchResult:
    """Run one full training of a config (a one-trial search with nothing to sample), logged to
    MLflow like any trial."""
    raw = load_config_file(path)
    config = dict(raw["config"])
    try:
        TrialConfig.from_dict(config)  # unknown or invalid settings fail before Ray starts
    except (TypeError, ValueError) as err:
        raise InputError(f"config file {path}: {err}") from err
    if epochs is not None:
        config["epochs"] = epochs
    options: dict[str, Any] = {
        "name": name or f"{raw.get('name') or 'config'}-train",
        "data": data if data is not None else raw.get("data"),
        # A built-in workload picks the built-in data when the config names none (`data`: null
        # in the file): unet3d's volumes, not the classifier's images.
        **({"workload": config["workload"]} if config.get("workload") in get_args(WorkloadName)
           else {}),
        "space": {},
        "base": config,
        "num_trials": 1,
        "epochs": int(config.get("epochs", 3)),
        "seed": int(config.get("seed", 0)),
        "baseline": "none",  # one training, nothing to compare it with
        **spec_options,
    }
    if output_dir:
        options["output_dir"] = output_dir
    if tracking_uri:
        options["tracking_uri"] = tracking_uri
    try:
        spec = SearchSpec(**options)
    except ValueError as err:
        raise InputError(str(err)) from err
    return run_search(spec)


def resume_search(path: str | Path, *, data: Any = None, **kwargs: Any) -> SearchResult:
    """Continue a search whose driver was stopped or killed: `path` is its folder
    (output_dir/name). A search on in-memory data needs the same `data` again."""
    from orchestrator.folder import SearchFolder

    folder = SearchFolder(Path(path).resolve())
    if not folder.state.is_file():
        raise InputError(f"{path} is not a search folder (no {folder.state.name}); pass "
                         "output_dir/name of the search to resume")
    state = folder.read_state()
    if state.get("finished"):
        raise InputError(f"the search in {path} already finished; start a new one instead")
    values = {**state["spec"], "tracking_uri": state.get("tracking_uri")}
    if str(values.get("data", "")).startswith("<in-memory"):
        if data is None:
            raise InputError(f"the search in {path} ran on in-memory data; resume it from "
                             "Python with resume_search(path, data=<the same data>)")
        values["data"] = data
    if values.get("name") == folder.root.name:  # resume it where it is, even if moved
        values["output_dir"] = str(folder.root.parent)
    try:
        spec = SearchSpec.from_dict(values)
    except ValueError as err:  # e.g. its data file was moved away since
        raise InputError(f"cannot resume {path}: {err}") from err
    return run_search(spec, resume=True, **kwargs)


__all__ = ["SearchResult", "SearchSpec", "load_config_file", "resume_search", "run_search",
           "train_config"]
