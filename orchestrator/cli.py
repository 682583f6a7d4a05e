"""The `orchestrator` command: parses, validates, and calls the same Python API users call.

    orchestrator search [--spec FILE] [--trials N] [--epochs E] [--data FILE.npz] ...
    orchestrator resume OUTPUT_DIR/NAME
    orchestrator train  BEST_CONFIG.json [--epochs E] [--tracking-uri URI]

`search` takes one flag per SearchSpec field, derived from the dataclass (orchestrator/
spec_flags.py), so a new field is a new flag with its field doc as help.

Exit codes: 0 ok; 1 the search ran but hands nothing over (no trial completed, no answer
measured); 2 bad input (refused before any work: one line on stderr); 3 the search failed while
running (the message names the stage, the traceback file and the resume command); 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
import typing

import yaml

from orchestrator import IMPORTED_AT
from orchestrator.api import SearchResult, SearchSpec, resume_search, run_search, train_config
from orchestrator.errors import InputError, SearchFailed
from orchestrator.interrupt import SearchInterrupted
from orchestrator.plain_yaml import load as load_yaml
from orchestrator.spec_flags import add_field_flags, literal_choices, spec_options
from trainables.config import LR_SCALINGS, TrialConfig

WIDE_HELP = ("print the whole leaderboard (every column, as leaderboard.csv holds it) instead "
             "of the columns that fit 120 characters")
# --lr-scaling is a shortcut for --set lr_scaling=...: its choices are TrialConfig's (the
# annotation's, once it is a Literal; LR_SCALINGS, which validates it, until then).
LR_SCALING_CHOICES = literal_choices(typing.get_type_hints(TrialConfig)["lr_scaling"]) \
    or LR_SCALINGS


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, exit code 2
        self.exit(2, f"orchestrator: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="orchestrator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("search", help="search for the fastest config that keeps accuracy")
    s.add_argument("--spec", help="YAML/JSON spec file; flags below override its values")
    add_field_flags(s, SearchSpec)  # one flag per field: --trials, --set KEY=VALUE, ...
    s.add_argument("--lr-scaling", choices=LR_SCALING_CHOICES,
                   help=f"how lr follows the batch size (default {TrialConfig.lr_scaling}); "
                        "a shortcut for --set lr_scaling=...")
    s.add_argument("--check", action="store_true",
                   help="validate the spec, data and space, print what would run, and exit "
                        "without starting Ray")
    s.add_argument("--wide", action="store_true", help=WIDE_HELP)

    r = sub.add_parser("resume", help="continue a search whose driver was killed")
    r.add_argument("dir", help="the search's folder: OUTPUT_DIR/NAME (holds search_state.json)")
    r.add_argument("--wide", action="store_true", help=WIDE_HELP)

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
    """The SearchSpec the `search` flags (and --spec file) describe; ValueError if it is bad."""
    options = spec_options(args, SearchSpec)
    if options.get("warm_start", "seeds") != "seeds":
        try:
            options["warm_start"] = load_yaml(options["warm_start"])
        except yaml.YAMLError as err:
            raise ValueError("--warm-start is not 'seeds' or a JSON list of knob mappings: "
                             f"{str(err).splitlines()[0]}") from None
    if args.lr_scaling:
        options["base"] = options.get("base", {}) | {"lr_scaling": args.lr_scaling}
    if args.spec:
        return SearchSpec.from_file(args.spec, **options)
    return SearchSpec(**options)


def checked_spec(args: argparse.Namespace) -> SearchSpec:
    """The spec, validated (with --check: everything a search checks before Ray); anything
    wrong with it is an InputError."""
    try:
        spec = spec_from_args(args)
        if args.check:
            from orchestrator.preflight import check_spec

            check_spec(spec)
        return spec
    except ValueError as err:  # DataError (a data file) and InputError are ValueErrors too
        raise InputError(str(err)) from err


def print_summary(result: SearchResult, out=sys.stdout, wide: bool = False) -> None:
    print(f"\nLeaderboard ({result.objective_formula})", file=out)
    print(result.leaderboard(wide=wide), file=out)
    for line in result.notes:  # knob importance, speedup vs baseline, payback
        print(line, file=out)
    print(f"\nsearch wall time   {result.wall_time_s:.1f} s", file=out)
    print(f"best config        {result.best_config_path or '(no trial completed)'}", file=out)
    print(f"leaderboard CSV    {result.leaderboard_path}", file=out)
    print(f"Pareto set CSV     {result.pareto_path}", file=out)
    print(f"MLflow store       {result.tracking_uri}  (experiment {result.experiment_name!r})",
          file=out)
    print(f"open it with       {result.mlflow_ui_command()}", file=out)


def run(args: argparse.Namespace) -> SearchResult | None:
    """Run the parsed command; None for `search --check`, which runs nothing. A search's wall
    time (and cost) starts when this process began running our code (`IMPORTED_AT`, before its
    imports): what the user waits for."""
    started = IMPORTED_AT
    if args.command == "resume":
        return resume_search(args.dir, started=started)
    if args.command == "train":
        return train_config(args.config, name=args.name, data=args.data, epochs=args.epochs,
                            output_dir=args.output_dir, tracking_uri=args.tracking_uri)
    spec = checked_spec(args)
    return None if args.check else run_search(spec, started=started)


def main(argv: list[str] | None = None) -> int:
    # `--model module:function`, `--task module:Class`, `--space module:function` import from
    # the working directory, as `python -m` would (the installed command's own folder is
    # first on its path instead).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    args = build_parser().parse_args(argv)
    try:
        result = run(args)
    except InputError as err:  # refused before any work
        print(f"orchestrator: error: {err}", file=sys.stderr)
        return 2
    except SearchFailed as err:  # a stage of the running search raised: stage, file, resume
        print(f"orchestrator: {err}", file=sys.stderr)
        return 3
    except SearchInterrupted as stop:
        print(f"orchestrator: {stop}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once
        print("orchestrator: stopped at once (second interrupt)", file=sys.stderr)
        return 130
    if result is None:
        return 0
    print_summary(result, wide=getattr(args, "wide", False))
    return exit_code(result)


def exit_code(result: SearchResult) -> int:
    """0 where the search hands something over: its best trial, or (a race, whose decided
    trials are not ranked) the measured answer in best_config.json; else 1."""
    return 0 if result.best is not None or result.best_config is not None else 1
