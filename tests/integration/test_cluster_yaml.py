"""cluster.yaml is a valid Ray cluster launcher config whose node types match real instances, and
the search's resource plan fits on it. No Ray, no cloud: python -m pytest -q tests/integration/test_cluster_yaml.py"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import ray.autoscaler
import yaml

from orchestrator.resources import plan, worker_cpu_limit

ROOT = Path(__file__).resolve().parents[2]

# AWS instance type -> (vCPUs, GPUs), from the EC2 instance-type pages.
INSTANCES = {
    "m5.2xlarge": (8, 0), "m5.4xlarge": (16, 0),
    "g5.xlarge": (4, 1), "g5.2xlarge": (8, 1), "g5.12xlarge": (48, 4), "g5.48xlarge": (192, 8),
    "p4d.24xlarge": (96, 8), "p5.48xlarge": (192, 8),
}


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text())


def test_matches_the_schema_that_ships_with_ray(config):
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)


def test_launcher_accepts_it(config):
    """The launcher's own checks after it fills in its AWS defaults (what `ray up` runs first)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(config)))


def test_node_types_declare_their_real_resources(config):
    types = config["available_node_types"]
    gpu_types = []
    for name, node_type in types.items():
        instance = node_type["node_config"]["InstanceType"]
        assert instance in INSTANCES, f"{name}: unknown instance type {instance}"
        vcpus, gpus = INSTANCES[instance]
        res = node_type["resources"]
        assert 0 <= res.get("CPU", vcpus) <= vcpus, name
        assert res.get("GPU", 0) == gpus, f"{name}: {instance} has {gpus} GPU(s)"
        if gpus:
            gpu_types.append((gpus, node_type))
    assert {g for g, _ in gpu_types} >= {1, 8}  # a 1-GPU and an 8-GPU node type
    head = types[config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    # Trials size themselves to the GPUs up when the search starts: one GPU node stays up.
    assert any(t.get("min_workers", 0) >= 1 for _, t in gpu_types)
    assert sum(t.get("min_workers", 0) for t in types.values()) <= config["max_workers"]


def test_resource_plan_fits_a_worker_on_every_gpu_node(config):
    """The plan on the whole cluster at full size: each worker's CPUs fit beside its GPU."""
    types = config["available_node_types"]
    nodes = [types[config["head_node_type"]]["resources"]]
    for name, t in types.items():
        if name != config["head_node_type"]:
            nodes += [t["resources"]] * t.get("max_workers", 0)
    cpus = sum(n.get("CPU", 0) for n in nodes)
    gpus = sum(n.get("GPU", 0) for n in nodes)
    for max_workers in (1, 4, 8):
        p = plan(cpus, gpus, cpus_per_trial=None, max_concurrent=None, max_workers=max_workers,
                 worker_cpus=worker_cpu_limit(nodes))
        assert p.use_gpu and p.gpus_per_trial == max_workers
        smallest = min(n["CPU"] / n["GPU"] for n in nodes if n.get("GPU"))
        assert 1 <= p.cpus_per_worker <= smallest


def test_security_defaults(config):
    text = (ROOT / "cluster.yaml").read_text()
    # No credentials in the file: AWS keys come from the provider chain, the Ray token from a
    # mounted file.
    assert not re.search(r"AKIA[0-9A-Z]{16}|aws_secret_access_key|aws_access_key_id", text)
    assert "ssh_private_key" not in config["auth"]
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in head_start
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        assert "RAY_AUTH_MODE=token" in " ".join(config[key])
    assert "~/.ray/auth_token" in config["file_mounts"]


def test_setup_installs_the_project_with_the_torch_pin(config):
    setup = " ".join(config["setup_commands"])
    assert "-c ~/orchestrator/constraints.txt" in setup and "~/orchestrator" in setup
    assert config["file_mounts"]["~/orchestrator"] == "."
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text()
    # The CPU-only head gets the CPU build of the pinned torch *before* the project install
    # (the launcher runs head_setup_commands after setup_commands).
    cpu_torch = next(i for i, c in enumerate(config["setup_commands"]) if "whl/cpu" in c)
    project = next(i for i, c in enumerate(config["setup_commands"]) if "constraints.txt" in c)
    assert cpu_torch < project and "torch==2.13.0" in config["setup_commands"][cpu_torch]
    assert "nvidia-smi" in config["setup_commands"][cpu_torch]  # GPU nodes keep the CUDA build
