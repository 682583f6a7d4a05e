"""The `orchestrator` command: parses, validates, and calls the same Python API users call.

    orchestrator search [--spec FILE] [--trials N] [--epochs E] [--data FILE.npz] ...
    orchestrator resume OUTPUT_DIR/NAME
    orchestrator train  BEST_CONFIG.json [--epochs E] [--tracking-uri URI]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from orchestrator.interrupt import SearchInterrupted
from orchestrator.plain_yaml import load as load_yaml
from orchestrator.plain_yaml import load_value
from orchestrator.api import SearchResult, SearchSpec, resume_search, run_search, train_config
from trainables.data.arrays import DataError

KNOBS_SHOWN = 8  # knob columns printed in the console leaderboard


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, exit code 2
        self.exit(2, f"orchestrator: error: {message} (see --help)\n")


def _setting(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set wants KEY=VALUE, got {text!r}")
    try:
        return key, load_value(value)
    except yaml.YAMLError:
        raise argparse.ArgumentTypeError(f"--set {key}: cannot read value {value!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="orchestrator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("search", help="search for the fastest config that keeps accuracy")
    s.add_argument("--spec", help="YAML/JSON spec file; flags below override its values")
    s.add_argument("--name", help="search name: MLflow experiment and output folder")
    s.add_argument("--workload", choices=["classifier", "unet3d"],
                   help="built-in workload (default classifier)")
    s.add_argument("--model", help="your own model builder, module:function (needs --data)")
    s.add_argument("--data", help=".npz with x, y (optional x_val, y_val) or a folder of .npy "
                                  "volumes; default: the workload's synthetic set")
    s.add_argument("--space", help="registered space name or module:function (default: default)")
    s.add_argument("--trials", dest="num_trials", type=int, help="number of trials (default 8)")
    s.add_argument("--epochs", type=int, help="epochs per trial (default 3)")
    s.add_argument("--time-budget", dest="time_budget_s", type=float,
                   help="wall-clock budget of the whole search, seconds")
    s.add_argument("--objective", choices=["weighted", "time_to_target", "pareto",
                                           "match_baseline"])
    s.add_argument("--baseline", metavar="seeds|base|none|PATH",
                   help="trial run first to compare with (default: seeds; base for --model), "
                        "or an earlier search's baseline.json to compare with again")
    s.add_argument("--tolerance", type=float,
                   help="match_baseline: accuracy that may be lost vs the baseline (0.005)")
    s.add_argument("--full-epochs", type=int,
                   help="epochs of your real training; times are projected to it")
    s.add_argument("--lr-scaling", choices=["sqrt", "linear", "none"],
                   help="how lr follows the batch size (default sqrt)")
    s.add_argument("--time-weight", type=float,
                   help="weighted objective: accuracy lost per doubling of time (default 0.05)")
    s.add_argument("--reference-time", dest="reference_time_s", type=float,
                   help="weighted objective: time with zero penalty, seconds (default 10)")
    s.add_argument("--target", type=float, help="time_to_target objective: accuracy to reach")
    s.add_argument("--seed", type=int)
    s.add_argument("--early-stopping", action="store_true", default=None,
                   help="ASHA early stopping (scalar objectives)")
    s.add_argument("--grace-period", type=int, help="ASHA: epochs before a trial may stop")
    s.add_argument("--reduction-factor", type=int, help="ASHA: keep the top 1/N per rung")
    s.add_argument("--warm-start", help="'seeds' (bf16 + batch 64; bf16 + batch 128 at half width) "
                                        "or a JSON list "
                                        "of knob mappings to try first")
    s.add_argument("--cpus-per-trial", type=int)
    s.add_argument("--max-concurrent", dest="max_concurrent_trials", type=int)
    s.add_argument("--output-dir", help="where results go (default ./orchestrator_runs)")
    s.add_argument("--tracking-uri", help="MLflow URI (default sqlite:///$PWD/mlflow.db)")
    s.add_argument("--placement", choices=["PACK", "SPREAD"],
                   help="a trial's workers on as few nodes as possible (PACK, default) "
                        "or across nodes (SPREAD)")
    s.add_argument("--rerun-duplicates", action="store_true", default=None,
                   help="train a configuration again when the sampler repeats it (to measure "
                        "noise); default: report its first result as `duplicate`")
    s.add_argument("--profile", choices=["on", "off", "compile"],
                   help="pick speed-only switches (channels_last, cudnn_benchmark) by timing a "
                        "few steps at each trial's start: on (default), off, or compile (also "
                        "time torch.compile)")
    s.add_argument("--spatial-dims", type=int, choices=[0, 1, 2, 3],
                   help="spatial axes of a sample: 0 features (N,F), 1 signals (N,C,L), "
                        "2 images, 3 volumes (default: inferred from the shape)")
    s.add_argument("--check", action="store_true",
                   help="validate the spec, data and space, print what would run, and exit "
                        "without starting Ray")
    s.add_argument("--set", dest="base", action="append", type=_setting, default=[],
                   metavar="KEY=VALUE", help="fix a trial setting, e.g. --set lr=0.01")

    r = sub.add_parser("resume", help="continue a search whose driver was killed")
    r.add_argument("dir", help="the search's folder: OUTPUT_DIR/NAME (holds search_state.json)")

    t = sub.add_parser("train", help="run one training with a config (e.g. best_config.json)")
    t.add_argument("config", help="a best_config.json written by a search, or a YAML/JSON "
                                  "mapping of trial settings")
    t.add_argument("--name", help="MLflow experiment (default: the config's search name)")
    t.add_argument("--data", help="override the config's data file")
    t.add_argument("--epochs", type=int)
    t.add_argument("--output-dir")
    t.add_argument("--tracking-uri")
    return parser


def spec_from_args(args: argparse.Namespace) -> SearchSpec:
    options = {k: v for k, v in vars(args).items()
               if k not in ("command", "spec", "base", "check", "lr_scaling") and v is not None}
    if options.get("warm_start", "seeds") != "seeds":
        try:
            options["warm_start"] = load_yaml(options["warm_start"])
        except yaml.YAMLError as err:
            raise ValueError("--warm-start is not 'seeds' or a JSON list of knob mappings: "
                             f"{str(err).splitlines()[0]}") from None
    if args.base or args.lr_scaling:
        options["base"] = dict(args.base) | ({"lr_scaling": args.lr_scaling}
                                             if args.lr_scaling else {})
    if args.spec:
        return SearchSpec.from_file(args.spec, **options)
    return SearchSpec(**options)


def print_summary(result: SearchResult, out=sys.stdout) -> None:
    print(f"\nLeaderboard ({result.objective_formula})", file=out)
    print(result.leaderboard(result.knobs[:KNOBS_SHOWN]), file=out)
    for line in result.notes:  # knob importance, speedup vs baseline, payback
        print(line, file=out)
    print(f"\nsearch wall time   {result.wall_time_s:.1f} s", file=out)
    print(f"best config        {result.best_config_path or '(no trial completed)'}", file=out)
    print(f"leaderboard CSV    {result.leaderboard_path}", file=out)
    print(f"Pareto set CSV     {result.pareto_path}", file=out)
    print(f"MLflow store       {result.tracking_uri}  (experiment {result.experiment_name!r})",
          file=out)
    print(f"open it with       {result.mlflow_ui_command()}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "search" and args.check:
            from orchestrator.preflight import check_spec

            check_spec(spec_from_args(args))
            return 0
        if args.command == "search":
            result = run_search(spec_from_args(args))
        elif args.command == "resume":
            result = resume_search(args.dir)
        else:
            result = train_config(args.config, name=args.name, data=args.data,
                                  epochs=args.epochs, output_dir=args.output_dir,
                                  tracking_uri=args.tracking_uri)
    except (ValueError, DataError, FileNotFoundError) as err:
        print(f"orchestrator: error: {err}", file=sys.stderr)
        return 2
    except SearchInterrupted as stop:
        print(f"orchestrator: {stop}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once
        print("orchestrator: stopped at once (second interrupt)", file=sys.stderr)
        return 130
    print_summary(result)
    return 0 if result.best is not None else 1
