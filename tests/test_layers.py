"""The layout is a contract: layers import only downwards, nothing imports in a cycle, files stay short.

The layers of ``solver/``, bottom to top (a module may import its own layer and any layer below):

    core < budget < bounds < timing < heuristics < exact < portfolio < planning, costmodel, the
    ``pipesched.solver`` facade (``__init__``, ``registry``, ``isolated``) < formats, cli

``api/`` and ``runtime/`` sit on top of the solver and never import each other; the solver imports
neither FastAPI nor torch. Imports are read with :mod:`ast`, lazy ones inside functions included
(a lazy import upward is still an upward dependency). ``python -m pytest -q tests/test_layers.py``
is the command that shows there is no import cycle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the dev extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: Install name of each top-level folder (pyproject's package-dir).
FOLDERS = {"solver": "pipesched.solver", "api": "pipesched.api", "runtime": "pipesched.runtime",
           "pipesched": "pipesched"}
#: Rank of each solver layer, by the first folder (or module) under ``solver/``; ``__init__`` is the facade.
SOLVER_LAYERS: dict[str, int] = {
    "core": 0, "budget": 1, "bounds": 2, "timing": 3, "heuristics": 4, "exact": 5, "portfolio": 6,
    "planning": 7, "costmodel": 7, "__init__": 7, "registry": 7, "isolated": 7, "formats": 8, "cli": 8,
}
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every Python file of the installed namespace."""
    out: dict[str, Path] = {}
    for folder, name in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([name, *parts])] = path
    return out


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES.get(module, Path()).name == "__init__.py"


def _imports(module: str, path: Path) -> set[str]:
    """Every module ``module`` imports (absolute names), wherever the import statement sits."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            for alias in node.names:  # ``from pkg import module`` imports the module
                if f"{target}.{alias.name}" in MODULES:
                    found.add(f"{target}.{alias.name}")
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def solver_rank(module: str) -> int:
    """The layer of a ``pipesched.solver`` module (KeyError names a module with no layer yet)."""
    rest = module.removeprefix("pipesched.solver").lstrip(".").split(".")
    return SOLVER_LAYERS[rest[0] or "__init__"]


def test_every_solver_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if m.startswith("pipesched.solver") and
                     (m.removeprefix("pipesched.solver").lstrip(".").split(".")[0] or "__init__") not in SOLVER_LAYERS)
    assert not missing, f"add these to SOLVER_LAYERS in tests/test_layers.py: {missing}"


def test_solver_layers_import_only_downwards() -> None:
    upward = []
    for module, targets in GRAPH.items():
        if not module.startswith("pipesched.solver"):
            continue
        for target in targets:
            if target.startswith("pipesched.solver") and solver_rank(target) > solver_rank(module):
                upward.append(f"{module} (layer {solver_rank(module)}) imports {target} (layer {solver_rank(target)})")
    assert not upward, "\n".join(sorted(upward))


def _top(target: str) -> str:
    return target.split(".")[0] if not target.startswith("pipesched.") else ".".join(target.split(".")[:2])


@pytest.mark.parametrize(("importer", "forbidden"), [
    ("pipesched.solver", ("fastapi", "starlette", "uvicorn", "torch", "pipesched.api", "pipesched.runtime")),
    ("pipesched.api", ("torch", "pipesched.runtime")),
    ("pipesched.runtime", ("fastapi", "starlette", "pipesched.api")),
])
def test_folders_do_not_import_their_neighbours(importer: str, forbidden: tuple[str, ...]) -> None:
    bad = sorted(f"{m} imports {t}" for m, targets in GRAPH.items() if m == importer or m.startswith(importer + ".")
                 for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden))
    assert not bad, "\n".join(bad)


#: Layers of ``api/``, by the first folder (or module) under it; a module imports its own layer and
#: those below. ``http`` speaks HTTP; ``services`` decide (no HTTP); ``store`` keeps.
API_LAYERS: dict[str, int] = {
    "models": 0, "settings": 0, "store": 1, "solving": 1, "services": 2, "scaleout": 2, "batch": 2,
    "http": 3, "app": 4, "serve": 4, "cli": 4, "__init__": 4,
}
#: Same-layer neighbours that stay apart: the offline batch never reaches the service's insides.
API_APART = [("batch", "services"), ("batch", "scaleout"), ("services", "batch"), ("scaleout", "batch")]


def api_part(module: str) -> str:
    return module.removeprefix("pipesched.api").lstrip(".").split(".")[0] or "__init__"


def test_every_api_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if m.startswith("pipesched.api") and api_part(m) not in API_LAYERS)
    assert not missing, f"add these to API_LAYERS in tests/test_layers.py: {missing}"


def test_api_layers_import_only_downwards() -> None:
    bad = []
    for module, targets in GRAPH.items():
        if not module.startswith("pipesched.api"):
            continue
        for target in targets:
            if not target.startswith("pipesched.api"):
                continue
            here, there = api_part(module), api_part(target)
            if API_LAYERS[there] > API_LAYERS[here] or (here, there) in API_APART:
                bad.append(f"{module} ({here}) imports {target} ({there})")
    assert not bad, "\n".join(sorted(bad))


def test_only_the_http_layer_speaks_http() -> None:
    """Store, services, solver processes, scale-out and batch import neither FastAPI nor Starlette:
    the services answer with plain :class:`~pipesched.api.services.replies.Reply` data."""
    bad = sorted(f"{m} imports {t}" for m, targets in GRAPH.items()
                 if m.startswith("pipesched.api.") and api_part(m) not in ("http", "app", "serve", "cli")
                 for t in targets if t.split(".")[0] in ("fastapi", "starlette"))
    assert not bad, "\n".join(bad)


def test_only_the_app_wires_the_routes() -> None:
    """Only ``app`` and the routes themselves import a route module."""
    routes = "pipesched.api.http.routes"
    bad = sorted(f"{m} imports {t}" for m, targets in GRAPH.items()
                 if m.startswith("pipesched.api") and m != "pipesched.api.app" and not m.startswith(routes)
                 for t in targets if t.startswith(routes))
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), i.e. import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """Guard against a check that cannot fail."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """Guard against a check that cannot fail: a lazy import from core up to the portfolio is caught."""
    path = tmp_path / "mod.py"
    path.write_text("def f():\n    from ..portfolio.auto import solve_auto\n")
    targets = _imports("pipesched.solver.core.mod", path)
    assert "pipesched.solver.portfolio.auto" in targets
    assert solver_rank("pipesched.solver.portfolio.auto") > solver_rank("pipesched.solver.core.mod")


@pytest.mark.parametrize("folder", ["solver", "api", "runtime"])
def test_files_stay_under_the_line_limit(folder: str) -> None:
    long = sorted(f"{p.relative_to(ROOT)}: {n} lines" for p in (ROOT / folder).rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, f"split these (limit {MAX_LINES} lines):\n" + "\n".join(long)


def test_every_package_is_listed_in_pyproject() -> None:
    """setuptools maps sub-packages only when listed; a missing one is silently left out of ``pip install .``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    packages = {m for m in MODULES if _is_package(m)}
    assert sorted(packages - listed) == []
    assert all(config["package-dir"][name] == folder for folder, name in FOLDERS.items())


def _string_imports(path: Path) -> list[str]:
    """Where a module imports by name at run time (``importlib.import_module``, ``__import__``): imports
    the layering check above cannot see. (``importlib.util.find_spec``, asking whether an optional
    package is installed, imports nothing and is allowed.)"""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and node.module == "importlib" and any(
                a.name == "import_module" for a in node.names):
            found.append(f"{where} imports import_module")
        elif isinstance(node, ast.Attribute) and node.attr == "import_module":
            found.append(f"{where} calls import_module")
        elif isinstance(node, ast.Name) and node.id == "__import__":
            found.append(f"{where} calls __import__")
    return found


def test_the_solver_imports_nothing_by_string() -> None:
    found = [hit for path in sorted((ROOT / "solver").rglob("*.py")) for hit in _string_imports(path)]
    assert not found, "import these explicitly, so the layering check sees them:\n" + "\n".join(found)


def test_the_string_import_check_sees_importlib_and_dunder_import(tmp_path: Path) -> None:
    """Guard against a check that cannot fail."""
    (tmp_path / "mod.py").write_text("import importlib\nx = __import__('os')\nfrom importlib import import_module\n"
                                     "y = importlib.import_module('os')\nz = importlib.util.find_spec('os')\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert len(_string_imports(tmp_path / "mod.py")) == 3  # find_spec is not one
    finally:
        ROOT = saved


def _method_records() -> dict[str, list[str]]:
    """Every :class:`Method` record defined at module level anywhere in ``solver/``, by module."""
    import importlib

    from pipesched.solver.core.method import Method

    out: dict[str, list[str]] = {}
    for module in sorted(m for m in MODULES if m.startswith("pipesched.solver")):
        loaded = importlib.import_module(module)
        for name, value in vars(loaded).items():
            if isinstance(value, Method) and getattr(loaded, name) is value:
                out.setdefault(module, []).append(value.name)
    return out


def test_every_method_record_is_registered() -> None:
    """A method defined but not listed (``heuristics/catalog.py`` or ``registry.py``) fails here, instead
    of shipping silently unregistered."""
    from pipesched.solver.registry import REGISTRY

    records = _method_records()
    assert records, "no method records found: the check would pass vacuously"
    unregistered = sorted(f"{module}: {name}" for module, names in records.items() for name in names
                          if name not in REGISTRY)
    assert not unregistered, "add these to the registry:\n" + "\n".join(unregistered)
    defined = {name for names in records.values() for name in names}
    assert set(REGISTRY) == defined


def test_the_registration_check_sees_a_record_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard against a check that cannot fail: drop one method from the registry and the check fails."""
    from pipesched.solver import registry

    monkeypatch.setattr(registry, "REGISTRY", {k: v for k, v in registry.REGISTRY.items() if k != "v-memory"})
    with pytest.raises(AssertionError, match="v-memory"):
        test_every_method_record_is_registered()
