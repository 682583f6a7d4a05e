"""SearchSpec: everything one search needs, validated on construction.

The CLI flags, a YAML/JSON spec file and the Python API all build this one dataclass, so they
accept exactly the same options and fail with the same messages. The flags are derived from the
fields (orchestrator/spec_flags.py): a field's type gives its flag's type and choices (a Literal),
its docstring the flag's help, and its `metadata` a flag spelling other than `--field-name`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import yaml

from orchestrator.objective import make_objective
from orchestrator.plain_yaml import load as load_yaml
from trainables.config import TrialConfig
from trainables.fields import check_fields

# Choices live in the types; the tuples are derived for the modules that list them.
# ObjectiveName agrees with orchestrator.objective.OBJECTIVES, and WorkloadName with
# trainables.workloads.WORKLOADS (tests/orchestrator/test_cli_flags.py checks both).
ObjectiveName = Literal["weighted", "time_to_target", "pareto", "match_baseline"]
WorkloadName = Literal["classifier", "unet3d", "resnet18", "unet3d-64"]
Placement = Literal["PACK", "SPREAD"]
ProfileMode = Literal["on", "off", "compile"]
SpatialDims = Literal[0, 1, 2, 3]
Strategy = Literal["tune", "screen"]
ConfirmMode = Literal["race", "full"]
PLACEMENTS: tuple[str, ...] = get_args(Placement)
PROFILE_MODES: tuple[str, ...] = get_args(ProfileMode)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(kw_only=True)
class SearchSpec:
    name: str = "default"
    """Search name: the MLflow experiment and the folder under `output_dir`."""
    workload: WorkloadName = "classifier"
    """Built-in workload: 'classifier' (a small 2D CNN), 'unet3d' (3D segmentation), or the
    two sized for a GPU: 'resnet18' (CIFAR-shaped images) and 'unet3d-64' (64^3 crops)."""
    model: str | Any | None = field(default=None, metadata={"metavar": "module:function"})
    """Your own model builder as 'module:function' (needs `data`), or (API) a function
    (TrialConfig, DataMeta) -> nn.Module. Every switch of the loop applies to it."""
    task: str | Any | None = field(default=None, metadata={"metavar": "module:Class"})
    """Your own training as a Task: its model, loss, optimizer (and schedule), score and an
    optional augmentation (trainables/loop/task.py, docs/reference.md#your-training-a-task), as
    'module:Class' (made with no arguments) or (API) an object; needs `data`. Every switch of
    the loop applies to it. Instead of `model`, whose built-in rest (cross-entropy, AdamW,
    accuracy or Dice) it replaces."""
    data: str | Any | None = field(default=None, metadata={"metavar": "PATH"})
    """An .npz (`x`, `y`, optional `x_val`, `y_val`), a .parquet (tensor column `x`, label
    column `y`), a folder of .npy volumes, or (API) an ArrayData / a dict of arrays; default
    (None): the workload's built-in synthetic set."""
    space: str | dict | Any = field(default="default",
                                    metadata={"metavar": "NAME|module:function"})
    """A registered space name ('default'; 'compact', the knobs the seeds name first at few
    values, for strategy screen; 'small'; 'pipeline': search_spaces/default.py),
    'module:function', a written dict, or a function (API only)."""
    base: dict[str, Any] = field(default_factory=dict, metadata={"flag": "--set"})
    """Fixed trial settings (TrialConfig fields, e.g. lr=0.01) that the space does not search."""
    epochs: int = 3
    """Epochs per trial (a shortcut for base['epochs'])."""
    strategy: Strategy = "tune"
    """How configurations are found: 'tune' (Optuna proposes `num_trials` configurations and
    each trains, Ray Tune) or 'screen' (every combination of the space's choices is timed for a
    few steps, its time to the baseline's accuracy is predicted, and at most `num_trials` of
    the fastest predicted are trained to it: match_baseline only; orchestrator/screen/)."""
    confirm: ConfirmMode = "race"
    """Strategy 'screen': how a confirmation is decided. 'race': each is stopped once its
    learning curve tells its time to the target (extrapolated against the baseline's curve at
    equal progress, with bounds; orchestrator/screen/race.py), and only the fastest expected
    trains to the target; 'full': each trains until it reaches the target or is cut."""
    num_trials: int = field(default=8, metadata={"flag": "--trials"})
    """Trials to run (the search may stop earlier on `time_budget_s`). Under strategy 'screen'
    the configurations confirmed for this accuracy, earlier searches' on the same workload and
    data included: a second search confirms only what this leaves."""
    time_budget_s: float | None = field(default=None, metadata={"flag": "--time-budget"})
    """Wall-clock budget of the whole search, seconds; running trials are stopped when it runs
    out."""
    runs_ahead: float | None = None
    """Strategy 'screen', the race: how many runs you will train with the answer. Once an
    answer is secured, a candidate predicted slower than the best so far is raced only where
    what it may save over these runs pays for deciding it (orchestrator/screen/bets.py).
    Default: the runs the search itself takes to pay back."""
    objective: ObjectiveName | None = None
    """How trials are ranked: 'weighted' (accuracy minus a penalty per doubling of time),
    'time_to_target' (fastest to `target`), 'pareto' (accuracy against time) or 'match_baseline'
    (fastest within `tolerance` of the baseline). Formulas in orchestrator/objective.py and
    docs/reference.md. Default: 'match_baseline' under strategy 'screen' (the only one it
    answers), else 'weighted'."""
    time_weight: float = 0.05
    """Weighted objective: accuracy lost per doubling of training time."""
    reference_time_s: float = field(default=10.0, metadata={"flag": "--reference-time"})
    """Weighted objective: the time at which the time penalty is zero, seconds."""
    target: float | None = None
    """time_to_target objective: the validation accuracy to reach."""
    baseline: str | None = field(default=None,
                                 metadata={"metavar": "seeds|base|none|runs:/ID|CSV|PATH"})
    """What every trial is compared with: a run made first, outside `num_trials` ('seeds': the
    legacy loop with the seed write-ups' 'before' habits; 'base': your settings as you run them
    today), 'none', or your run from history, not trained again: 'runs:/RUN_ID' (an MLflow run
    of the search's store with a `val_score` per epoch), a CSV of epoch, seconds, score, or an
    earlier search's `baseline.json`. Default: 'seeds' for built-in workloads, 'base' for your
    model or task."""
    baseline_set: dict[str, Any] = field(default_factory=dict,
                                         metadata={"flag": "--baseline-set"})
    """The baseline's own settings where your run today differs from the fixed ones (`base`),
    e.g. batch_size=100: the space may still search them (a knob you `--set` is pinned for every
    trial instead)."""
    rerun_baseline: bool = False
    """Train the baseline again even where an earlier screen search of the same model, data,
    settings and length recorded it on this machine kind (by default that one is reused: the
    same target, no second run)."""
    tolerance: float = 0.005
    """match_baseline objective: accuracy that may be given up against the baseline's score."""
    full_epochs: int | None = None
    """Epochs of your real training: every time term is projected to it (warmup_s + steady
    time per epoch x full_epochs); default: the trial's epochs."""
    seed: int = 0
    """Seeds the sampler and every trial."""
    early_stopping: bool = False
    """ASHA: stop trials whose objective trails their peers at the same epoch (scalar
    objectives only; pruned trials are compared at projected full-run time)."""
    grace_period: int = 1
    """ASHA: epochs every trial runs before it may be stopped."""
    reduction_factor: int = 2
    """ASHA: keep the top 1/reduction_factor of trials at each rung."""
    warm_start: str | list | None = field(default=None, metadata={"metavar": "seeds|JSON"})
    """Configs tried first (Optuna learns from them): a list of knob mappings (JSON on the
    command line), or 'seeds' for two known fast settings (bf16 with batch 64; bf16 with batch
    128 at half width), limited to the searched knobs."""
    cpus_per_trial: int | None = None
    """CPUs one trial's workers share; default: all CPUs of one machine (locally: all of them;
    on a cluster: one node's; with GPUs: the CPUs beside the trial's GPUs). Fair timing."""
    max_concurrent_trials: int | None = field(default=None,
                                              metadata={"flag": "--max-concurrent"})
    """Trials at once; default: as many as fit without sharing cores or GPUs."""
    always_use_worker_group: bool = False
    """Run single-worker trials through a Ray Train worker group too. Off by default: the
    same loop runs in the Tune trial process, without ~10 s of worker-group start-up."""
    output_dir: str = "orchestrator_runs"
    """Where Ray's trial folders, the leaderboard and the best config are written."""
    tracking_uri: str | None = None
    """MLflow tracking URI; default: a SQLite file `mlflow.db` in the working directory."""
    spatial_dims: SpatialDims | None = None
    """Spatial axes of one sample: 0 feature vectors (N, F), 1 signals (N, C, L), 2 images
    (N, C, H, W) or (N, H, W), 3 volumes; default (None): inferred from the array's shape."""
    placement: Placement = "PACK"
    """Where a trial's workers go on a multi-node cluster: 'PACK' (as few nodes as possible:
    fast collectives) or 'SPREAD' (across nodes: more memory bandwidth, survives one node)."""
    profile: ProfileMode = "on"
    """Speed-only switches (channels_last; cudnn_benchmark on CUDA) are picked at the start of
    each trial by timing a few steps per value, not searched: 'on', 'off', or 'compile' (also
    times torch.compile, whose one-off cost is spread over the trial's steps). A switch you
    pin (`base`) or search keeps your value. See trainables/loop/profile.py."""
    rerun_duplicates: bool = False
    """Train a configuration (knobs and seed) again when the sampler suggests it again, to
    measure run-to-run noise. Off: the repeat reports the first run's result as `duplicate`."""

    def __post_init__(self) -> None:
        if self.objective is None:  # the strategy's own question
            self.objective = "match_baseline" if self.strategy == "screen" else "weighted"
        if self.spatial_dims is not None and not _is_choice(self.spatial_dims, SpatialDims):
            raise ValueError(f"spatial_dims must be 0, 1, 2 or 3 (got {self.spatial_dims!r})")
        _check_choices(self)  # "placement must be one of ['PACK', 'SPREAD'] (got 'spread')"
        check_fields(self)  # "time_weight: expected a number, got 'abc'" before the rest
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"name {self.name!r} must be 1-100 letters, digits, '_', '.' or '-'")
        self._check_training_and_data()
        for key, value, lowest in (("epochs", self.epochs, 1), ("num_trials", self.num_trials, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise ValueError(f"{key} must be an integer >= {lowest} (got {value!r})")
        for key in ("time_budget_s", "runs_ahead"):
            if getattr(self, key) is not None and not getattr(self, key) > 0:
                raise ValueError(f"{key} must be > 0 (got {getattr(self, key)})")
        for key in ("cpus_per_trial", "max_concurrent_trials"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{key} must be an integer >= 1 (got {value!r})")
        self.make_objective()  # validates weight / target / tolerance / full_epochs
        from orchestrator.baseline import check_baseline

        check_baseline(self)
        if self.grace_period < 1 or self.reduction_factor < 2:
            raise ValueError("grace_period must be >= 1 and reduction_factor >= 2 "
                             f"(got {self.grace_period}, {self.reduction_factor})")
        if self.strategy == "screen" and not self.make_objective().needs_baseline:
            raise ValueError(f"strategy 'screen' predicts the time to the baseline's accuracy: "
                             f"its objective is match_baseline (the default under it), not "
                             f"{self.objective!r}")
        if self.strategy == "screen" and self.early_stopping:
            raise ValueError("strategy 'screen' stops each trial once it is decided; ASHA "
                             "(early_stopping) is for strategy 'tune'")
        if self.early_stopping and not self.make_objective().scalar:
            raise ValueError("early_stopping needs a scalar objective (weighted or "
                             "time_to_target); pareto compares finished trials only")
        if self.early_stopping and self.grace_period >= self.epochs:
            raise ValueError(f"grace_period {self.grace_period} leaves nothing to stop with "
                             f"{self.epochs} epochs; lower it or raise epochs")
        if self.warm_start is not None and self.warm_start != "seeds" and not (
                isinstance(self.warm_start, list)
                and all(isinstance(p, dict) for p in self.warm_start)):
            raise ValueError("warm_start must be 'seeds' or a list of {knob: value} mappings")
        if not isinstance(self.base, dict):
            raise ValueError("base must be a mapping of trial setting -> value")
        TrialConfig.from_dict(self.trial_base())  # unknown or invalid fixed settings fail now
        if not isinstance(self.baseline_set, dict):
            raise ValueError("baseline_set must be a mapping of trial setting -> value")
        if self.baseline_set:
            try:
                TrialConfig.from_dict({**self.trial_base(), **self.baseline_set})
            except ValueError as err:
                raise ValueError(f"baseline_set: {err}") from None

    def _check_training_and_data(self) -> None:
        """The data exists and fits what trains; a model or task path imports."""
        if isinstance(self.data, (str, Path)) and not Path(self.data).exists():
            raise ValueError(f"data file {self.data} does not exist")
        if self.model is None and isinstance(self.data, (str, Path)):
            check_data_kind(self.workload, Path(self.data))  # volumes need unet3d, and back
        if self.model is not None and self.data is None:
            raise ValueError("a custom model needs its own data: pass data (an .npz, a folder "
                             "of .npy volumes, or arrays)")
        if self.task is not None and self.data is None:
            raise ValueError("your task needs its own data: pass data (an .npz, a folder of .npy "
                             "volumes, or arrays)")
        if self.task is not None and self.model is not None:
            raise ValueError("give a task or a model, not both: the task builds its model "
                             "(its `model(cfg, meta)` method)")
        self.resolved_model()  # a bad module:function path fails now
        self.resolved_task()

    def trials_line(self) -> str:
        """What trains, for the header: '8 trials x 3 epochs', or under strategy screen (whose
        confirmations plan their own epochs) 'a screen, then at most 8 confirmations'."""
        if self.strategy == "screen":
            return f"a screen, then at most {self.num_trials} confirmations"
        return f"{self.num_trials} trials x {self.epochs} epochs"

    def trial_base(self) -> dict[str, Any]:
        workload = self.workload if self.model is None and self.task is None else "custom"
        return {"workload": workload, "epochs": self.epochs, "seed": self.seed, **self.base}

    def resolved_model(self):
        """The custom model builder, imported from 'module:function' if given as a path."""
        if self.model is None or callable(self.model):
            return self.model
        from search_spaces import load_function

        return load_function(str(self.model), "model")

    def resolved_task(self, kind: str = "classify"):
        """What the trials train (trainables/loop/task.py): your task (a 'module:Class' path
        made with no arguments, a class, or an object), your model with the built-in rest for
        the data's `kind`, or None for a built-in workload."""
        from trainables.loop.task import ModelTask

        if self.task is None:
            model = self.resolved_model()
            return ModelTask(model, kind) if model is not None else None
        task = self.task
        if isinstance(task, str):
            from search_spaces import load_function

            task = load_function(task, "task")
        if isinstance(task, type):
            try:
                task = task()
            except TypeError as err:
                raise ValueError(f"task {_qualname(task)} must be made with no arguments "
                                 f"({err}); or pass an object of it through the API") from None
        return task

    @property
    def arrays(self):
        """In-memory data given through the API (an ArrayData or a dict of arrays), else None."""
        from trainables.data.arrays import ArrayData, from_arrays

        if isinstance(self.data, ArrayData):
            return self.data
        if isinstance(self.data, dict):
            return from_arrays(self.data)
        return None

    def make_objective(self):
        return make_objective(self.objective, time_weight=self.time_weight,
                              reference_time_s=self.reference_time_s, target=self.target,
                              full_epochs=self.full_epochs, tolerance=self.tolerance)

    def resolved_tracking_uri(self) -> str:
        uri = self.tracking_uri or "sqlite:///mlflow.db"
        if uri.startswith("sqlite:///"):  # absolute: the same store from any directory
            return f"sqlite:///{Path(uri.removeprefix('sqlite:///')).resolve()}"
        return uri

    def resolved_artifact_root(self) -> Path | None:
        """Where run artifacts go: beside a SQLite store's file (`mlartifacts/`); None lets a
        tracking server choose. Never the working directory of a `ray job submit` job, which
        Ray deletes after the job."""
        uri = self.resolved_tracking_uri()
        if uri.startswith("sqlite:///"):
            return Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts"
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what spec.yaml holds): objects given through the API become names."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("space", "model", "task"):
            value = out[key]
            if value is not None and not isinstance(value, (str, dict)):
                # A function or a class by its name; a task object by its class's.
                named = value if isinstance(value, type) or key != "task" else type(value)
                out[key] = _qualname(named)
        if out["data"] is not None and not isinstance(out["data"], str):
            out["data"] = f"<in-memory {type(out['data']).__name__}>"
        return out

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SearchSpec:
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"unknown spec option(s) {unknown}; known: {cls.field_names()}")
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> SearchSpec:
        """Load a YAML or JSON spec with yaml.safe_load: plain data only, no object tags."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"spec file {path} does not exist")
        try:
            raw = load_yaml(path.read_text()) if path.suffix != ".json" \
                else json.loads(path.read_text())
        except (yaml.YAMLError, json.JSONDecodeError) as err:
            first = str(err).splitlines()[0]
            raise ValueError(f"spec file {path} is malformed: {first}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"spec file {path} must hold a mapping of option -> value")
        return cls.from_dict({**raw, **overrides})


def check_data_kind(workload: str, data: Path) -> None:
    """A folder of .npy volumes is segmentation data, a file is images: each needs its model."""
    from trainables.workloads import family

    if data.is_dir() and family(workload) != "unet3d":
        raise ValueError(f"data {data} is a folder of .npy volumes (segmentation): add "
                         "--workload unet3d, or pass your own 3D model with --model")
    if not data.is_dir() and family(workload) == "unet3d":
        raise ValueError(f"workload unet3d trains on volumes: data {data} must be a folder with "
                         "images/ and labels/ of .npy volumes")


def _is_choice(value: Any, choices: Any) -> bool:
    """`value` is one of a Literal's values, of the same type (True is not 1, 1.0 is not 1)."""
    return any(value == c and type(value) is type(c) for c in get_args(choices))


def _check_choices(spec: SearchSpec) -> None:
    """A Literal field's wrong value fails naming the values it may take."""
    for name, tp in get_type_hints(type(spec)).items():
        # an `X | None` field is checked as X once it holds a value
        choices = next((t for t in (tp, *get_args(tp)) if get_origin(t) is Literal), None)
        value = getattr(spec, name, None)
        if value is None and type(None) in get_args(tp):
            continue
        if choices is not None and not _is_choice(value, choices):
            raise ValueError(f"{name} must be one of {list(get_args(choices))} (got {value!r})")


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"
