"""Hypothesis strategies for what a user may type: random `search` flags and random spec files.

Values are drawn from pools that mix valid settings with the mistakes people make (a string
where a number belongs, exponent numbers, nulls, lists, unknown names, out-of-range numbers),
so both the accepted and the refused paths are exercised.
"""

from __future__ import annotations

from hypothesis import strategies as st

from orchestrator.spec import SearchSpec
from trainables.config import TrialConfig

# What a value may look like on the command line or in YAML.
TEXT_VALUES = ["1e-3", "3e-4", "abc", "none", "null", "true", "false", "0", "1", "2", "-1", "64",
               "0.5", "1.5", "[1, 2]", "[fp32, bf16-mixed]", "{a: 1}", "", "1e400", ".nan",
               "fp16-mixed", "bf16-mixed", "onecycle", "unet3d", "foo:bar", "'quoted'", "[",
               "{uniform: [0.1, 2]}", "{randint: [1, 4]}", "{loguniform: [1e-4, 1e-2]}"]
PLAIN_VALUES = [None, True, False, 0, 1, 2, 3, -1, 8, 64, 0.0, 0.5, 1e-3, 2.5, "abc", "fp32",
                "fp16-mixed", "seeds", [], [1, 2], ["fp32", "bf16-mixed"], {}, {"lr": 1e-3},
                {"uniform": [16, 64]}, {"choice": [0.5, 1.0]}, {"randint": [1, 3]}, "1e-3"]

KNOBS = TrialConfig.field_names() + ["bogus_knob"]
SPEC_KEYS = [k for k in SearchSpec.field_names() if k not in ("data", "model", "output_dir",
                                                              "tracking_uri")] + ["bogus"]


def set_flags() -> st.SearchStrategy[list[str]]:
    """Zero to three `--set KEY=VALUE` pairs (sometimes malformed: no '=')."""
    pair = st.builds(lambda k, v, eq: ["--set", f"{k}{'=' if eq else ''}{v}"],
                     st.sampled_from(KNOBS), st.sampled_from(TEXT_VALUES),
                     st.booleans() | st.just(True))
    return st.lists(pair, max_size=3).map(lambda pairs: [a for p in pairs for a in p])


def option_flags() -> st.SearchStrategy[list[str]]:
    """A random subset of the search flags, each with a valid or an invalid value."""
    numeric = st.sampled_from(["0", "1", "2", "3", "-1", "0.5", "1e-3", "abc", "1e400"])
    flags = {
        "--trials": numeric, "--epochs": numeric, "--time-weight": numeric,
        "--reference-time": numeric, "--target": numeric, "--seed": numeric,
        "--grace-period": numeric, "--reduction-factor": numeric, "--time-budget": numeric,
        "--cpus-per-trial": numeric, "--max-concurrent": numeric,
        "--objective": st.sampled_from(["weighted", "time_to_target", "pareto", "best"]),
        "--space": st.sampled_from(["default", "small", "pipeline", "nope", "a:b", "os:getcwd"]),
        "--warm-start": st.sampled_from(["seeds", "[{batch_size: 64}]", "[{width: 9}]", "[{",
                                         "{}", "[1]", "[{bogus: 1}]", "1e-3"]),
        "--spatial-dims": st.sampled_from(["0", "1", "2", "3", "4", "x"]),
        "--placement": st.sampled_from(["PACK", "SPREAD", "pack"]),
        "--name": st.sampled_from(["ok-name", "bad name", "x" * 120]),
        "--workload": st.sampled_from(["classifier", "unet3d", "gpt"]),
    }
    chosen = st.lists(st.sampled_from(sorted(flags)), unique=True, max_size=5)
    switches = st.lists(st.sampled_from(["--early-stopping"]), max_size=1)

    @st.composite
    def build(draw):
        argv = []
        for flag in draw(chosen):
            argv += [flag, draw(flags[flag])]
        return argv + draw(switches)

    return build()


def spec_texts() -> st.SearchStrategy[dict]:
    """A random spec mapping (written as YAML by the test)."""
    space = st.dictionaries(st.sampled_from(KNOBS), st.sampled_from(PLAIN_VALUES), max_size=3)
    value = st.sampled_from(PLAIN_VALUES) | space
    return st.dictionaries(st.sampled_from(SPEC_KEYS), value, max_size=5)


def cli_inputs() -> st.SearchStrategy[tuple[dict | None, list[str]]]:
    """(a spec mapping or None, the flags): one random `orchestrator search` invocation."""
    flags = st.builds(lambda a, b: a + b, option_flags(), set_flags())
    return st.tuples(st.none() | spec_texts(), flags)
