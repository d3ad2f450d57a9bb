"""The import graph of src/platonic points down (shared/docs/design.md, "Our own code").

Read statically with `ast` (every `import` and `from ... import`, function-level ones included), so a
lazy import inside a function counts like one at the top: it only hides a cycle until the function runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "platonic"

# the top of the dependency order, from the top down: each package imports nothing of those before it
TOP = ("platonic.cli", "platonic.recipe", "platonic.experiments", "platonic.world")
UPPER = TOP[1:] + TOP[:1]  # what the library below never imports
MAY_IMPORT_UPPER = TOP
FACADE = "platonic"  # the package's __init__: may name the experiment engine inside a function only
# inside the experiment engine, from the bottom up: a layer imports only those before it
ENGINE_LAYERS = (("platonic.experiments.engine",), ("platonic.experiments.setups",),
                 ("platonic.experiments.protocols", "platonic.experiments.checks", "platonic.experiments.tables"),
                 ("platonic.experiments.registry",), ("platonic.experiments.report", "platonic.experiments.plots"),
                 ("platonic.experiments.run",), ("platonic.experiments.command",))


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
    assert "platonic.experiments.engine" in graph["platonic.experiments.run"]  # from .engine import ...
    assert "platonic.experiments.engine.fastpath" in graph["platonic.experiments.protocols.paper"]
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


def test_the_top_packages_import_only_downwards():
    """cli above recipe above experiments above world: world/ builds data and weights, measuring it is the
    engine's job (experiments/checks); `platonic run` (recipe/) is a product surface above the engine."""
    graph = import_graph()
    upward = sorted(f"{m} -> {t}" for i, package in enumerate(TOP) for m, ts in graph.items() if _under(m, (package,))
                    for t in ts if _under(t, TOP[:i]))
    assert not upward, "imports pointing up: " + ", ".join(upward)


def test_the_experiment_engine_is_layered():
    """engine < setups < protocols, checks, tables < registry < report, plots < run < command."""
    graph = import_graph()
    layer = {m: i for i, names in enumerate(ENGINE_LAYERS) for m in graph if _under(m, names)}
    upward = sorted(f"{m} -> {t}" for m, ts in graph.items() if m in layer for t in ts
                    if t in layer and layer[t] > layer[m])
    assert not upward, "engine imports pointing up: " + ", ".join(upward)
    assert set(layer) == {m for m in graph if _under(m, ("platonic.experiments",)) and m != "platonic.experiments"}


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


def _private_imports(path: Path, module: str | None, is_package: bool) -> list[str]:
    """`from X import _name` of another platonic module, and `alias._name` on an imported platonic module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _targets(module, is_package, node)[0] if node.level else (node.module or "")
            if not (target == "platonic" or target.startswith("platonic.")) or target == module:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.name}:{node.lineno} imports {target}.{alias.name}")
                elif f"{target}.{alias.name}" in MODULES:
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.asname and a.name.startswith("platonic"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}")
    return found


MODULES = set(module_files())
ROOT = SRC.parent


def test_private_names_stay_inside_their_module():
    """Across modules (the package, its tests, research, benchmarks and scripts) only public names are imported."""
    found = []
    for name, (path, is_package) in module_files().items():
        found += _private_imports(path, name, is_package)
    for folder in ("tests", "research", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += _private_imports(path, None, False)
    assert not found, "private names used across modules: " + "; ".join(found)


def test_research_imports_what_packages_export():
    """Research scripts import the experiment engine and fine-tuning through their packages' exports."""
    deep = []
    for path in sorted((ROOT / "research").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("platonic.experiments.",
                                                                                            "platonic.finetuning.")):
                if node.module not in ("platonic.experiments.engine", "platonic.experiments.setups",
                                       "platonic.experiments.protocols", "platonic.experiments.checks"):
                    deep.append(f"{path.name}:{node.lineno} from {node.module}")
    assert not deep, "research imports module internals: " + "; ".join(deep)


def test_the_architecture_page_maps_every_subpackage():
    """docs/architecture.md names every package of src/platonic, and every path it names exists."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(platonic/[\w/.]*)`", text))
    missing = sorted(p for p in named if not (SRC / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
    packages = {f"{p.parent.relative_to(SRC).as_posix()}/" for p in PACKAGE.rglob("__init__.py")}
    unnamed = sorted(packages - named)
    assert not unnamed, f"docs/architecture.md does not name these packages: {unnamed}"


def test_the_image_and_audio_worlds_share_only_common():
    """world/image and world/audio import world/common and nothing of each other; common imports neither."""
    graph = import_graph()
    rules = {"platonic.world.image": ("platonic.world.audio",), "platonic.world.audio": ("platonic.world.image",),
             "platonic.world.common": ("platonic.world.image", "platonic.world.audio")}
    crossing = sorted(f"{m} -> {t}" for m, ts in graph.items() for package, banned in rules.items()
                      if _under(m, (package,)) for t in ts if _under(t, banned))
    assert not crossing, "world imports across image / audio: " + ", ".join(crossing)
