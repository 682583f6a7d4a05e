"""What a trial and each of its workers ask Ray for: one plan, read by everyone who sizes.

The driver sizes the plan once per search (`orchestrator.resources.plan`: fitted to the machine
or the cluster's free resources and node shapes); the search space's checks, the trial's Tune
actor and its Ray Train workers then all read their sizes from it, so none can disagree.

Fair timing: when time is part of the objective, trials must not compete for cores or devices.
On CPU a trial gets `cpus_per_trial` cores and its workers split them; on GPU every worker gets
its own GPU and the CPUs beside it (`cpus_per_worker`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourcePlan:
    use_gpu: bool
    cpus_per_trial: int
    gpus_per_trial: int
    max_concurrent_trials: int
    cpus_per_worker: float | None = None
    """GPU plans: each worker's CPUs (those beside its GPU); None: a trial's workers split
    `cpus_per_trial`."""

    def worker_cpus(self, workers: int) -> float:
        """The CPUs each of a trial's `workers` holds."""
        return self.cpus_per_worker or self.cpus_per_trial / workers

    def worker(self, workers: int) -> dict[str, float]:
        """One Ray Train worker's resources in a trial of `workers` workers."""
        return {"CPU": self.worker_cpus(workers), **({"GPU": 1} if self.use_gpu else {})}

    def threads(self, workers: int) -> int:
        """Intra-op threads of each worker: the CPUs it holds (more only adds contention)."""
        return max(1, int(self.worker_cpus(workers)))

    def in_process(self) -> dict[str, float]:
        """The Tune actor of a trial that trains in its own process (one worker). On a GPU: the
        CPUs beside that one GPU, not the whole trial's (sized for its widest worker group),
        which no 1-GPU node may have."""
        if self.use_gpu:
            return {"CPU": self.cpus_per_worker or self.cpus_per_trial, "GPU": 1}
        return {"CPU": self.cpus_per_trial}

    @staticmethod
    def token() -> dict[str, float]:
        """The Tune actor of a worker-group trial: its TorchTrainer's workers reserve the real
        resources. ({"CPU": 0} alone is rejected, hence the token memory request.)"""
        return {"CPU": 0, "memory": 1}
