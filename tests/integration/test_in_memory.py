"""A search on in-memory data writes every output (it used to crash at the end, dumping the
arrays as JSON, and leave the MLflow parent RUNNING); the README's Python-API snippet and
`examples/bring_your_own.py` run as written, on tiny sizes.
Run: python -m pytest -q tests/integration/test_in_memory.py"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from orchestrator import SearchSpec, run_search, train_config
from tests.conftest import sqlite_store

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINY = {"batch_size": 16, "patch_size": 12, "width": 0.5, "lr": 0.01}


def _arrays(tmp_path) -> dict[str, np.ndarray]:
    from tests.conftest import make_npz

    with np.load(make_npz(tmp_path / "tiny.npz")) as f:
        return {k: f[k] for k in f.files}


def _parent(tracking_uri: str, name: str):
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(name)
    # The search's parent run (a baseline, if one ran, has its own, tagged role=baseline).
    (parent,) = [r for r in client.search_runs([exp.experiment_id])
                 if r.data.tags.get("orchestrator.role") == "search"]
    return parent


def _assert_every_output(result, tracking_uri: str, kind: str) -> None:
    """The search ended whole: every file written, its data described (not dumped), its MLflow
    parent run FINISHED."""
    assert result.best["status"] == "completed"
    best = json.loads(Path(result.best_config_path).read_text())
    assert best["data"] == f"<in-memory {kind}>"  # a description, not the arrays
    for path in (result.leaderboard_path, result.pareto_path):
        assert Path(path).is_file()
    assert json.loads((Path(result.output_dir) / "search_state.json").read_text())["finished"]
    assert _parent(tracking_uri, result.experiment_name).info.status == "FINISHED"


def test_a_search_on_arrays_writes_every_output(ray_session, tmp_path, capsys):
    """ArrayData here; a dict of arrays in the bring-your-own example's search below."""
    from trainables.data.arrays import from_arrays

    data = from_arrays(_arrays(tmp_path))
    spec = SearchSpec(name="mem-ArrayData", baseline="none", data=data, epochs=1, num_trials=2,
                      space={"batch_size": [16, 32, 512]}, base={k: v for k, v in TINY.items()
                                                             if k != "batch_size"},
                      output_dir=str(tmp_path / "runs"),
                      tracking_uri=sqlite_store(tmp_path))
    result = run_search(spec)

    # 512 would make 0 optimizer steps on 240 samples: dropped from the space, never a trial.
    assert "knob 'batch_size': dropped [512]" in capsys.readouterr().err
    assert set(result.trials["batch_size"]) <= {16, 32}
    _assert_every_output(result, spec.tracking_uri, "ArrayData")


def _readme_python_api() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_python_api_snippet_runs(ray_session, in_tmp):
    """The snippet as written, with tiny data and sizes laid over its SearchSpec."""
    from tests.conftest import make_npz

    code = _readme_python_api()
    imports = "from orchestrator import SearchSpec, run_search, train_config\n"
    assert code.startswith(imports)
    data = make_npz(in_tmp / "tiny.npz")
    sqlite_store(in_tmp)  # the snippet's default store, ./mlflow.db, made empty beforehand

    def tiny_spec(**options) -> SearchSpec:
        return SearchSpec(**{**options, "data": data, "num_trials": 1, "epochs": 1,
                             "baseline": "none",
                             "space": {}, "base": TINY})

    scope = {"SearchSpec": tiny_spec, "run_search": run_search, "train_config": train_config}
    exec(compile(code.removeprefix(imports), "README.md", "exec"), scope)
    result = scope["result"]
    assert result.best_config["width"] == 0.5 and Path(result.best_config_path).is_file()
    assert len(result.trials) == 1 and result.best is not None


def test_the_bring_your_own_example_runs(ray_session, tmp_path):
    spec = importlib.util.spec_from_file_location("bring_your_own",
                                                  ROOT / "examples" / "bring_your_own.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    uri = sqlite_store(tmp_path)
    result = example.main(n=200, num_trials=2, epochs=1, output_dir=str(tmp_path / "runs"),
                          tracking_uri=uri,
                          baseline="none")  # the example's search is the subject
    assert result.experiment_name == "byo-example"
    _assert_every_output(result, uri, "dict")  # the example's data: a dict of arrays
