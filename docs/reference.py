"""Write the generated sections of docs/reference.md from the code, so they cannot drift from it.

    .venv/bin/python docs/reference.py           # rewrite docs/reference.md's generated sections
    .venv/bin/python docs/reference.py --check   # exit 1 (and say so) if they are out of date

Each generated section sits between two markers in docs/reference.md,

    <!-- generated: NAME (docs/reference.py; do not edit by hand) -->
    ...
    <!-- end generated: NAME -->

and the prose around them is written by hand. Where each section comes from:

    stages      orchestrator/search.py's docstring (the stages of a search)
    folder      orchestrator/folder.py's docstring (the files of a search folder)
    options     the fields of orchestrator.spec.SearchSpec: flag (orchestrator/spec_flags.py),
                default, choices (a Literal type) and the field's docstring
    commands    the `orchestrator` flags that are not SearchSpec fields (orchestrator/cli.py)
    objectives  orchestrator.objective.OBJECTIVES and each objective class: docstring, formula
                as a search prints it, the options it reads, and its traits
    statuses    trainables.status.TrialStatus (each member's docstring) and STATUS_TABLE
    resume      trainables.status.OnResume and the notes under STATUS_TABLE
    exit-codes  orchestrator/cli.py's docstring

No Ray is started: importing the CLI imports Ray's modules, nothing more.
tests/test_docs.py fails when docs/reference.md is not what this writes.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
import textwrap
import typing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference.md"
COMMAND = ".venv/bin/python docs/reference.py"
if str(REPO) not in sys.path:  # run as a script from anywhere: the project's packages first
    sys.path.insert(0, str(REPO))

_BEGIN = "<!-- generated: {name} (docs/reference.py; do not edit by hand) -->"
_END = "<!-- end generated: {name} -->"
# The time_to_target formula needs a target; this one is the docs' example (`--target 0.85`).
EXAMPLE_TARGET = 0.85


def _cell(text: str) -> str:
    """One markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: object) -> str:
    return f"`{value}`"


def attribute_docs(obj: object) -> dict[str, str]:
    """{name: docstring} of the string literals that follow assignments in a class or module
    body (Python keeps no attribute docstrings at runtime)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    body = tree.body[0].body if inspect.isclass(obj) else tree.body
    docs: dict[str, str] = {}
    for stmt, after in zip(body, body[1:]):
        target = getattr(stmt, "target", None) or (getattr(stmt, "targets", None) or [None])[0]
        if (isinstance(target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[target.id] = inspect.cleandoc(after.value.value)
    return docs


def _docstring_block(doc: str, start: str) -> str:
    """The indented block of a module docstring that starts with the line starting with
    `start`, up to the first line that is not indented (a diagram such as the stages)."""
    lines = inspect.cleandoc(doc).splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    block = []
    for line in lines[first:]:
        if line and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).rstrip()


# -- sections ----------------------------------------------------------------------------------
def stages() -> str:
    import orchestrator.search as search

    return "```text\n" + _docstring_block(search.__doc__, "prepare") + "\n```"


def folder() -> str:
    import orchestrator.folder as folder_module

    return "```text\n" + _docstring_block(folder_module.__doc__, "OUTPUT_DIR/NAME/") + "\n```"


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return _code(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return _code(f.default_factory())
    return "required"


def options() -> str:
    from orchestrator.spec import SearchSpec
    from orchestrator.spec_flags import field_docs, flag_name, literal_choices

    hints, docs = typing.get_type_hints(SearchSpec), field_docs(SearchSpec)
    rows = ["| option | flag | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(SearchSpec):
        flag = flag_name(f)
        meaning = docs.get(f.name, "")
        choices = literal_choices(hints[f.name])
        if choices is not None:
            meaning += " One of: " + ", ".join(_code(c) for c in choices) + "."
        if flag is not None and f.metadata.get("flag") == "--set":
            flag = "--set KEY=VALUE"
        rows.append(f"| {_code(f.name)} | {_code(flag) if flag else 'API only'} | "
                    f"{_cell(_default(f))} | {_cell(meaning)} |")
    return "\n".join(rows)


def commands() -> str:
    from orchestrator.cli import build_parser
    from orchestrator.spec import SearchSpec

    fields = set(SearchSpec.field_names())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    rows = ["| command | argument | meaning |", "|---|---|---|"]
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if name == "search" and action.dest in fields:
                continue  # in the options table
            arg = action.option_strings[-1] if action.option_strings else action.dest.upper()
            meaning = action.help or ""
            if action.choices:
                meaning += (" " if meaning.endswith(".") else ". " if meaning else "") + \
                    "One of: " + ", ".join(
                    _code(c) for c in action.choices) + "."
            if not meaning and action.option_strings:
                meaning = "as the search option of the same name"
            rows.append(f"| {_code('orchestrator ' + name)} | {_code(arg)} | {_cell(meaning)} |")
    return "\n".join(rows)


def _objective_classes() -> dict[str, type]:
    from orchestrator.objective import OBJECTIVES, Objective

    classes = {next(f.default for f in dataclasses.fields(c) if f.name == "name"): c
               for c in typing.get_args(Objective)}
    if list(classes) != list(OBJECTIVES):  # the union and the names must list the same four
        raise ValueError(f"orchestrator.objective: Objective has {list(classes)}, "
                         f"OBJECTIVES {list(OBJECTIVES)}")
    return classes


def objectives() -> str:
    from orchestrator.spec import SearchSpec
    from orchestrator.spec_flags import flag_name

    spec_fields = {f.name: f for f in dataclasses.fields(SearchSpec)}
    out = []
    for name, cls in _objective_classes().items():
        target = EXAMPLE_TARGET if name == "time_to_target" else None
        objective = SearchSpec(objective=name, target=target).make_objective()
        reads = [f.name for f in dataclasses.fields(cls) if f.name in spec_fields and f.init]
        flags = ", ".join(_code(flag_name(spec_fields[r])) for r in reads)
        traits = [
            "One number (ASHA `--early-stopping` may rank by it)" if objective.scalar
            else "Two numbers (no `--early-stopping`: ASHA needs one)",
            "a trial stops once its value is decided" if objective.stops_at_target
            else "a trial runs its epochs",
            "needs a baseline" if objective.needs_baseline else "a baseline is optional",
        ]
        example = f" (`--target {EXAMPLE_TARGET}`)" if target is not None else ""
        out += [
            f"#### `{name}`",
            "",
            "```text",
            inspect.cleandoc(cls.__doc__),
            "```",
            "",
            f"* As a search prints it, with the defaults{example}: `{objective.formula}`",
            f"* Options it reads: {flags}.",
            f"* {'; '.join(traits)}.",
            "",
        ]
    return "\n".join(out).rstrip()


def _optuna(traits) -> str:
    if traits.optuna_state is None:
        return "never told"
    if traits.feasible is False:
        return f"{traits.optuna_state}, worst value, constraint violated"
    return traits.optuna_state


def statuses() -> str:
    from trainables.status import STATUS_TABLE, TrialStatus

    docs = attribute_docs(TrialStatus)
    rows = ["| status | meaning | Optuna is told | MLflow run | ranked | repeat proposal "
            "reuses it | on resume |", "|---|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no"}
    for status in TrialStatus:
        t = STATUS_TABLE[status]
        rows.append(f"| {_code(status.value)} | {_cell(docs.get(status.name, ''))} | "
                    f"{_optuna(t)} | {t.mlflow_status} | {yes[t.rankable]} | "
                    f"{yes[t.repeatable]} | {_code(t.on_resume.value)} |")
    return "\n".join(rows)


def resume() -> str:
    import trainables.status as status_module
    from trainables.status import OnResume

    docs = attribute_docs(OnResume)
    rows = ["| on resume | what `orchestrator resume` does |", "|---|---|"]
    rows += [f"| {_code(a.value)} | {_cell(docs.get(a.name, ''))} |" for a in OnResume]
    notes = attribute_docs(status_module).get("STATUS_TABLE", "")
    return "\n".join(rows) + ("\n\n" + notes if notes else "")


def exit_codes() -> str:
    import orchestrator.cli as cli

    text = " ".join(cli.__doc__.split())
    found = re.search(r"Exit codes: (.*?\.)(?: [A-Z]|$)", text)
    if found is None:
        raise ValueError("orchestrator/cli.py's docstring has no 'Exit codes: ...' paragraph")
    body = found.group(1).removesuffix(".")
    rows = ["| exit code | meaning |", "|---|---|"]
    for part in re.split(r"; (?=\d+ )", body):
        code, _, meaning = part.partition(" ")
        rows.append(f"| {code} | {_cell(meaning)} |")
    return "\n".join(rows)


SECTIONS = {"stages": stages, "folder": folder, "options": options, "commands": commands,
            "objectives": objectives, "statuses": statuses, "resume": resume,
            "exit-codes": exit_codes}


# -- the file ----------------------------------------------------------------------------------
def render(text: str) -> str:
    """`text` (docs/reference.md) with every generated section written anew from the code."""
    for name, make in SECTIONS.items():
        begin, end = _BEGIN.format(name=name), _END.format(name=name)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"docs/reference.md lacks the markers of section {name!r}:\n"
                             f"{begin}\n{end}")
        text = pattern.sub(lambda _m: f"{begin}\n{make()}\n{end}", text, count=1)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that docs/reference.md is up to date (exit 1 if not)")
    args = parser.parse_args(argv)
    old = REFERENCE.read_text()
    new = render(old)
    if args.check:
        if new != old:
            print(f"docs/reference.md is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if new != old:
        REFERENCE.write_text(new)
        print("docs/reference.md: generated sections rewritten")
    else:
        print("docs/reference.md: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
