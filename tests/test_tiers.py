"""The fast tier stays free of Ray and servers by rule (tests/conftest.py): an unmarked test that
starts Ray or an `mlflow server` fails with a message saying to mark it `integration`. The
tests here are unmarked, so the refusals they check are the live ones. No Ray is started. Run:
    python -m pytest -q tests/test_tiers.py
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import conftest

REFUSED = "is not marked integration; mark it"


def test_ray_init_is_refused():
    import ray

    try:
        with pytest.raises(pytest.fail.Exception, match=REFUSED):
            ray.init(num_cpus=1)
        assert not ray.is_initialized()
    finally:
        if ray.is_initialized():  # the rule is broken: leave no Ray to later tests
            ray.shutdown()


def test_a_search_is_refused_before_ray_starts(tiny_npz, in_tmp):
    import ray

    from orchestrator import SearchSpec, run_search

    spec = SearchSpec(name="refused", data=tiny_npz, num_trials=1, epochs=1, space={},
                      baseline="none", base={"patch_size": 12, "batch_size": 16})
    with pytest.raises(pytest.fail.Exception, match=r"init_ray\).*" + REFUSED):
        run_search(spec)
    assert not ray.is_initialized()


def test_a_simulated_cluster_and_an_mlflow_server_are_refused(tmp_path):
    from ray.cluster_utils import Cluster

    from tests.mlflow_server import MlflowServer

    with pytest.raises(pytest.fail.Exception, match=r"simulated Ray cluster.*" + REFUSED):
        Cluster(initialize_head=True)
    server = MlflowServer(tmp_path)
    with pytest.raises(pytest.fail.Exception, match=r"mlflow server.*" + REFUSED):
        server.start()
    assert not server.running


@pytest.mark.parametrize("argv", [
    ["ray", "start", "--head"],
    [sys.executable, "-m", "orchestrator", "search"],
    [sys.executable, "-u", "-m", "tests.integration.placement_probe", "out"],
    [sys.executable, "examples/bring_your_own.py"],
    [sys.executable, "-c", "import ray; ray.init()"],
    ["mlflow", "server", "--port", "5000"],
    ["bash", "-c", "orchestrator search --trials 1"],
    "orchestrator search --trials 1",
], ids=["ray-start", "orchestrator", "probe", "script", "python-c", "mlflow", "bash", "shell"])
def test_subprocesses_that_start_ray_or_a_server_are_refused(argv):
    with pytest.raises(pytest.fail.Exception, match=REFUSED):
        subprocess.run(argv, shell=isinstance(argv, str), capture_output=True)


def test_other_subprocesses_run():
    assert subprocess.run(["git", "--version"], capture_output=True).returncode == 0
    done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    assert done.stdout.strip() == "42"


class _Item:
    """The parts of a collected test that the tier hooks read."""

    def __init__(self, name: str, fixtures: list[str], integration: bool, nodes: bool = False):
        self.nodeid, self.fixturenames, self.integration = name, fixtures, integration
        self.nodes = nodes

    def get_closest_marker(self, name: str):
        marked = {"integration": self.integration, conftest.OWN_NODES: self.nodes}
        return object() if marked.get(name) else None


@pytest.mark.parametrize("fixture", conftest.SERVER_FIXTURES)
def test_only_integration_tests_may_ask_for_ray_or_a_server(fixture):
    with pytest.raises(pytest.fail.Exception, match=f"uses the {fixture} fixture.*{REFUSED}"):
        conftest.pytest_runtest_setup(_Item("t.py::unmarked", ["tmp_path", fixture], False))
    conftest.pytest_runtest_setup(_Item("t.py::marked", [fixture], True))  # no error
    conftest.pytest_runtest_setup(_Item("t.py::unit", ["tmp_path"], False))


def test_unit_tests_run_before_integration_tests_in_file_order():
    items = [_Item("a::1", [], True), _Item("a::2", [], False), _Item("b::1", [], True),
             _Item("b::2", [], False)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["a::2", "b::2", "a::1", "b::1"]


def test_integration_tests_that_start_ray_nodes_of_their_own_run_last():
    items = [_Item("a::1", [], True), _Item("n::1", [], True, nodes=True), _Item("n::2", [], True,
             nodes=True), _Item("b::1", [], True), _Item("c::1", [], False)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["c::1", "a::1", "b::1", "n::1", "n::2"]
