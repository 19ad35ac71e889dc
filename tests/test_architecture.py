"""The shape of the code, checked from its source: pydaf's modules import each other without cycles, nothing outside
``pydaf/core`` uses a private attribute of a data set, and ``pydaf/queries`` has no function-level pydaf imports."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from pydaf.core.readers import DafReader, DafReadOnly
from pydaf.core.writers import DafWriter

PACKAGE = Path(__file__).resolve().parent.parent / "pydaf"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


@dataclass(frozen=True)
class Import:
    target: str
    line: int
    in_function: bool


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, *, type_checking: bool = False) -> list[Import]:
    """The pydaf modules a module imports when it runs (``TYPE_CHECKING`` blocks excluded unless ``type_checking``),
    each resolved to the deepest pydaf module it names (``from .x import y`` is ``x.y`` when that is a module)."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    package = module if _is_package(module) else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pydaf":
                    found.append(Import(alias.name, node.lineno, in_function))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] == "pydaf":
                for alias in node.names:
                    candidate = f"{source}.{alias.name}"
                    found.append(Import(candidate if candidate in MODULES else source, node.lineno, in_function))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(tree, False)
    return found


def _edges() -> dict[str, set[str]]:
    """Who imports whom. Importing ``pydaf.a.b`` also runs the package ``pydaf.a``'s ``__init__`` (the root package
    ``pydaf`` aside: every module is inside it, and it is initialised before any of them)."""
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for module in MODULES:
        for found in _imports(module):
            target = found.target
            while target not in MODULES:
                target = target.rpartition(".")[0]
            parts = target.split(".")
            for depth in range(2, len(parts) + 1):
                name = ".".join(parts[:depth])
                if name != module and not module.startswith(name + "."):
                    edges[module].add(name)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strong_connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                strong_connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            strong_connect(node)
    return components


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(_edges()) == []


def test_queries_import_pydaf_modules_only_at_module_level():
    late = [f"{module}:{found.line} imports {found.target}" for module in MODULES if module.startswith("pydaf.queries")
            for found in _imports(module) if found.in_function]
    assert late == []


def _private_attributes() -> set[str]:
    names = {name for cls in (DafReader, DafWriter, DafReadOnly) for name in vars(cls)
             if name.startswith("_") and not name.startswith("__")}
    return names | {"_state", "_format", "_name", "_base"}


@pytest.mark.parametrize("module", [module for module in MODULES if not module.startswith("pydaf.core")])
def test_no_private_data_set_attributes_outside_core(module):
    private = _private_attributes()
    tree = ast.parse(MODULES[module].read_text())
    reach_ins = [f"{module}:{node.lineno} .{node.attr}" for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr in private
                 and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]
    assert reach_ins == []


# The layers, bottom up: a module may import modules of its own layer or of layers below it, never above. Measured
# with every import: module level, function level and ``TYPE_CHECKING`` (a type is a dependency too).
LAYERS = [
    {"errors", "storage_types", "julia_text", "hints", "keys"},
    {"_os"},  # maps, pages, file identity
    {"kernels"},  # array kernels; below sparse, which wraps them: they take any CSC's arrays (``CscArrays``)
    {"sparse"},
    {"abc"},  # the storage contract: its relayout default uses the kernels and the sparse type
    {"core"},
    {"formats"},
    {"open"},
    {"queries"},
    {"composition"},
    {"manifest", "check", "demo", "example_data", "testing"},
    {"interop", "dask"},  # dask: arrays and queries of stored data sets on a cluster
    {"julia"},
    {"dafpy"},  # dafpy's API (names, arguments, return forms) over pydaf's; nothing below imports it
    {"cli", "__main__"},
]

# The upward edges allowed, each for a reason:
ALLOWED_UPWARD = {
    # The reader's query methods (``get_query``, ``get_np_query``, ``get_frame``...), a facade over the query engine
    # as anndata's data model calls its IO (``from ..io import write_h5ad`` inside methods); imported in the methods.
    ("pydaf.core.readers", "pydaf.queries"),
}


def _layer(module: str) -> int:
    top = module.split(".")[1] if module != "pydaf" else ""
    for level, names in enumerate(LAYERS):
        if top in names:
            return level
    raise AssertionError(f"{module} is in no layer: add its top-level name to LAYERS")


def _upward_edges(modules: dict[str, list[Import]]) -> list[str]:
    found = []
    for module, imports in modules.items():
        if module == "pydaf":  # the package's facade, above every layer
            continue
        for edge in imports:
            target = edge.target
            if target == "pydaf" or _layer(target) <= _layer(module):
                continue
            if any(module.startswith(source) and target.startswith(destination)
                   for source, destination in ALLOWED_UPWARD):
                continue
            found.append(f"{module}:{edge.line} imports {target}")
    return found


def test_every_module_is_in_a_layer():
    for module in MODULES:
        if module != "pydaf":
            _layer(module)


def test_no_upward_imports():
    assert _upward_edges({module: _imports(module, type_checking=True) for module in MODULES}) == []


def test_the_layer_check_finds_a_planted_upward_edge():
    planted = {"pydaf._os.maps": [Import("pydaf.core.readers", 7, True)],
               "pydaf.core.readers": [Import("pydaf.queries.query", 9, True), Import("pydaf.composition.views", 3,
                                                                                     False)]}
    assert _upward_edges(planted) == ["pydaf._os.maps:7 imports pydaf.core.readers",
                                      "pydaf.core.readers:3 imports pydaf.composition.views"]


def test_the_kernels_may_not_name_the_sparse_type():
    # (Once an allowed edge: the reductions now take any CSC's arrays, so sparse -> kernels is the only direction.)
    planted = {"pydaf.kernels.reductions": [Import("pydaf.sparse", 46, False)]}
    assert _upward_edges(planted) == ["pydaf.kernels.reductions:46 imports pydaf.sparse"]


def _top_level_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module in MODULES:
        if module == "pydaf":
            continue
        top = ".".join(module.split(".")[:2])
        edges.setdefault(top, set())
        for edge in _imports(module, type_checking=True):
            target = ".".join(edge.target.split(".")[:2])
            allowed = any(module.startswith(source) and edge.target.startswith(destination)
                          for source, destination in ALLOWED_UPWARD)
            if target != top and target != "pydaf" and not allowed:
                edges[top].add(target)
    return {top: {target for target in targets if target in edges} for top, targets in edges.items()}


def test_no_package_level_cycles_but_the_allowed_edges():
    assert _cycles(_top_level_edges()) == []
