"""The house rules of the code base, checked: layers you can see, no import circles, small files.

Layers, bottom up (a module may import its own layer or lower ones, never a higher one):
    trainables.config, trainables.status -> trainables.data -> trainables.models
    -> trainables.workloads -> trainables.loop -> trainables.trial -> search_spaces -> orchestrator
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trainables", "search_spaces", "orchestrator")
LAYERS = [
    ("trainables.config", "trainables.status", "trainables.identity"),
    ("trainables.data",),
    ("trainables.models",),
    ("trainables.workloads",),
    ("trainables.loop",),
    ("trainables.trial",),
    ("search_spaces",),
    ("orchestrator",),
]
MAX_LINES = 400
MAX_FIT_LINES = 80
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules imported anywhere in the file (late imports inside functions count too:
    an import moved into a function to dodge a circle is still a circle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def _layer(module: str) -> int:
    for level, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return -1  # a package's public face (e.g. trainables/__init__) re-exports from any layer


def test_no_module_imports_a_higher_layer():
    modules = _modules()
    upward = []
    for name, path in modules.items():
        mine = _layer(name)
        if mine < 0:
            continue
        for imported in _imports(path, modules):
            if _layer(imported) > mine:
                upward.append(f"{name} imports {imported}")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_import_circles():
    modules = _modules()
    # Package __init__ files re-export their own submodules; that is not a circle.
    graph = {name: {m for m in _imports(path, modules) if m != name
                    and not (path.name == "__init__.py" and m.startswith(name + "."))}
             for name, path in modules.items()}
    circles = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        for nxt in graph.get(node, ()):
            if nxt in stack:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in done:
                visit(nxt, stack + [nxt], done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], done)
    assert not circles, "import circles:\n" + "\n".join(sorted(set(circles)))


def test_no_python_file_is_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_function_is_longer_than_a_screen():
    """A function over MAX_FUNCTION_LINES lines in orchestrator/ or trainables/ is a class or
    a few functions in disguise (a closure-heavy one: six closures sharing two dicts are six
    methods of one object)."""
    long = []
    for path in _modules().values():
        if path.relative_to(ROOT).parts[0] not in ("orchestrator", "trainables"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {lines}")
    assert not long, "functions over the limit:\n" + "\n".join(long)


def test_the_search_driver_does_not_ask_which_strategy_it_holds():
    """orchestrator/search.py runs the strategy's stages; a branch on its name would braid two
    drivers into one (orchestrator/strategy.py)."""
    source = (ROOT / "orchestrator" / "search.py").read_text()
    assert "spec.strategy ==" not in source and '"screen"' not in source and \
        "isinstance(self.strategy" not in source and "screens" not in source


def test_fit_reads_in_one_screen():
    from trainables.loop.fit import fit

    assert len(inspect.getsource(fit).splitlines()) <= MAX_FIT_LINES


# A status word as a string literal outside trainables/status.py: (file, word) pairs allowed, and
# why. Everything else reads `TrialStatus` and its traits (one home per word).
STATUS_WORDS_ALLOWED = {
    ("orchestrator/tracking/mlflow_writer.py", "interrupted"),  # the parent run's tag name
}


def test_no_bare_status_strings_outside_status_py():
    from trainables.status import TrialStatus

    words = {s.value for s in TrialStatus}
    found = []
    for path in _modules().values():
        rel = str(path.relative_to(ROOT))
        if rel == "trainables/status.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in words \
                    and (rel, node.value) not in STATUS_WORDS_ALLOWED:
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, "status words outside trainables/status.py:\n" + "\n".join(found)


def test_mlflow_is_reached_only_through_the_tracking_package():
    outside = []
    for name, path in _modules().items():
        if name.startswith("orchestrator.tracking"):
            continue
        for imported in ast.walk(ast.parse(path.read_text())):
            if isinstance(imported, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in imported.names] + [getattr(imported, "module", "") or ""]
                if any(n == "mlflow" or n.startswith("mlflow.") for n in names):
                    outside.append(f"{name}:{imported.lineno}")
    assert not outside, "MLflow imported outside orchestrator/tracking/:\n" + "\n".join(outside)
