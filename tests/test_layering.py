"""The import graph of src/platonic points down (shared/docs/design.md, "Our own code").

Read statically with `ast` (every `import` and `from ... import`, function-level ones included), so a
lazy import inside a function counts like one at the top: it only hides a cycle until the function runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "platonic"

# only these may import the world builder and the experiment engine: the top of the dependency order
UPPER = ("platonic.world", "platonic.experiments")
MAY_IMPORT_UPPER = ("platonic.world", "platonic.experiments", "platonic.cli")
FACADE = "platonic"  # the package's __init__: may name the experiment engine inside a function only


def module_files() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module under src/platonic."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _targets(name: str, is_package: bool, node: ast.AST) -> list[str]:
    """The dotted names one import statement reaches (a `from X import y` reaches X, and X.y if a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [module] + [f"{module}.{alias.name}" for alias in node.names]


def _import_nodes(tree: ast.AST, in_functions: bool):
    """Every import statement of `tree`; only those outside function bodies unless `in_functions`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if in_functions or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _import_nodes(node, in_functions)


def import_graph(in_functions: bool = True) -> dict[str, set[str]]:
    """Module -> the platonic modules it imports (the nearest existing module of each dotted name)."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        edges = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path)), in_functions):
            for target in _targets(name, is_package, node):
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") or (p == "platonic.cli" and name.startswith(p)) for p in prefixes)


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "platonic.models.base" in graph["platonic.models.hf_backend"]  # from .base import ...
    assert "platonic.experiments.fastpath" in graph["platonic.experiments.run"]
    assert "platonic.progress" in graph["platonic.models.base"]  # imported inside encode_probes
    assert "platonic.progress" not in import_graph(in_functions=False)["platonic.models.base"]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]


def test_no_import_cycles():
    cycles = strongly_connected(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def _upward(graph: dict[str, set[str]], modules) -> list[str]:
    return sorted(f"{module} -> {target}" for module, targets in graph.items()
                  if module in modules for target in targets if _under(target, UPPER))


def test_nothing_below_world_or_experiments_imports_them():
    below = [m for m in module_files() if not _under(m, MAY_IMPORT_UPPER) and m != FACADE]
    upward = _upward(import_graph(), below)
    assert not upward, "imports pointing up: " + ", ".join(upward)


def test_the_world_is_a_builder_that_never_imports_the_experiment_engine():
    """world/ builds data and weights; measuring it is the engine's job (experiments/world_checks)."""
    graph = import_graph()
    upward = sorted(f"{m} -> {t}" for m, ts in graph.items() if _under(m, ("platonic.world",))
                    for t in ts if _under(t, ("platonic.experiments", "platonic.cli")))
    assert not upward, "world imports pointing up: " + ", ".join(upward)


def test_the_package_facade_reaches_the_experiments_only_lazily():
    """`platonic.run_experiments` is resolved on first access (module __getattr__), never at import."""
    assert not _upward(import_graph(in_functions=False), [FACADE])
    assert _upward(import_graph(), [FACADE]) == ["platonic -> platonic.experiments"]


def test_the_public_api_lists_what_users_call():
    import platonic

    for name in ("TaskVector", "finetune", "FinetuneConfig", "run_experiments", "ExperimentSetup", "load_model",
                 "measure", "solve_bank", "apply", "save_model", "adapt", "Operator", "OperatorBank", "Descriptor",
                 "fold", "unfold", "LinearSite", "PlatonicError", "__version__"):
        assert name in platonic.__all__ and getattr(platonic, name) is not None
    assert len(set(platonic.__all__)) == len(platonic.__all__)
    assert not [n for n in platonic.__all__ if n.startswith("_") and n != "__version__"]
