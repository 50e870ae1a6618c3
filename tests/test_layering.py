"""The packages' floors, read from the source with ``ast`` (nothing is imported).

``tiers`` is the bottom floor; ``weaver`` and ``recall`` stand on it, side by side; ``daemon``
is the top (docs/architecture.md, "Packages"). The client, ``stratad_client`` (its own
distribution, in ``daemon/client/``), stands apart: it imports nothing of the server, and only
``daemon`` imports it. A package imports its own floor and the floors
below, never one above nor its neighbour: every import counts, at module level, inside a
function or under ``TYPE_CHECKING``. Modules import no cycle either (counting the imports run
when a module is loaded, ``TYPE_CHECKING`` ones included: mypy and readers follow them too).
And no module grows past :data:`MAX_LINES`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from daemon.dev.tree import sources
from tests.support import ROOT

# What each package may import, of the project's packages.
ALLOWED = {
    "tiers": {"tiers"},
    "weaver": {"weaver", "tiers"},
    "recall": {"recall", "tiers"},
    "daemon": {"daemon", "weaver", "recall", "tiers", "stratad_client"},
    "stratad_client": {"stratad_client"},
}
# Where each package's source is: the client's distribution sits in daemon/client/, outside
# the package daemon.
SOURCES = {package: ROOT / package for package in ALLOWED} | {
    "stratad_client": ROOT / "daemon" / "client" / "stratad_client"
}
CLIENT_DIST = ROOT / "daemon" / "client"

# "About 400 lines" (docs/architecture.md): past it, a module is split along a concept.
MAX_LINES = 400
SIZED = ("daemon", "tiers", "weaver", "recall", "tests/bench")
NOT_SIZED = ("daemon/client/stratad_client/pb/",)  # generated


def _modules() -> dict[str, Path]:
    """Every module of the four packages, by dotted name (a package by its own name)."""
    out = {}
    for package, source in SOURCES.items():
        for path in sources(source, ROOT):
            if package == "daemon" and path.is_relative_to(CLIENT_DIST):
                continue
            parts = list(path.relative_to(source.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, whether it runs when the module is loaded) for each import of
    a project module. ``from X import Y`` imports ``X.Y`` when that is a module, else ``X``;
    relative imports are resolved. An import in a function body runs later (False); one at
    module level, in a class body or under ``if TYPE_CHECKING:`` counts as loading (True)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, loading: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield _known(alias.name), child.lineno, loading
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[: len(here) - (child.level - 1)]
                    base = ".".join([*here, base] if base else here)
                for alias in child.names:
                    sub = f"{base}.{alias.name}" if base else alias.name
                    yield (sub if sub in MODULES else _known(base)), child.lineno, loading
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(child, False)
            else:
                yield from visit(child, loading)

    for target, line, loading in visit(tree, True):
        if target.split(".")[0] in ALLOWED:
            yield target, line, loading


def _known(dotted: str) -> str:
    """The longest prefix of ``dotted`` that is a project module (``dotted`` if none is)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in MODULES:
            return ".".join(parts[:end])
    return dotted


def _graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports when it is loaded."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _, loading in _imports(name, path):
            if loading and target in MODULES and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[tuple[frozenset[str], list[str]]]:
    """Each strongly connected component of more than one module (Tarjan's algorithm,
    iterative), with a cycle through it as a path (its first module repeated at the end)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [(frozenset(component), _path(graph, component)) for component in components]


def _path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, as a path of imports."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return [*reversed(chain), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def test_the_packages_import_no_floor_above_their_own():
    wrong = []
    for name, path in MODULES.items():
        package = name.split(".")[0]
        for target, line, _ in _imports(name, path):
            if target.split(".")[0] not in ALLOWED[package]:
                where = path.relative_to(ROOT)
                wrong.append(f"{where}:{line}: {name} imports {target}")
    allowed = "; ".join(f"{p} -> {', '.join(sorted(a))}" for p, a in ALLOWED.items())
    assert not wrong, (
        f"imports against the layering ({allowed}; docs/architecture.md):\n"
        + "\n".join(dict.fromkeys(wrong))
    )


def test_modules_import_no_cycle():
    found = [
        f"{' -> '.join(path)}" + (f" (modules in the cycle: {sorted(c)})" if len(c) > 2 else "")
        for c, path in _cycles(_graph())
    ]
    assert not found, "import cycles (imports run when a module loads):\n" + "\n".join(found)


def test_the_cycle_check_sees_a_cycle_and_the_module_names_resolve():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [(frozenset("abc"), ["a", "b", "c", "a"])]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert {"tiers", "tiers.core.errors", "daemon.cli.weaverctl", "recall.recipe"} <= MODULES.keys()
    imported = {
        target for target, _, _ in _imports("daemon.codec.status", MODULES["daemon.codec.status"])
    }
    assert "tiers.core.errors" in imported


def test_no_module_is_over_the_line_limit():
    sizes = {}
    for top in SIZED:
        for path in sources(ROOT / top, ROOT):
            where = path.relative_to(ROOT).as_posix()
            if not where.startswith(NOT_SIZED):
                sizes[where] = len(path.read_text().splitlines())
    over = sorted(f"{where}: {n} lines" for where, n in sizes.items() if n > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines (split them):\n" + "\n".join(over)


def test_the_floors_in_the_architecture_doc_are_these() -> None:
    """docs/architecture.md's Packages table names, per package, exactly what it may import."""
    doc = (ROOT / "docs" / "architecture.md").read_text().split("## Packages", 1)[1]
    floors = {}
    for line in doc.split("\n## ", 1)[0].splitlines():
        if line.startswith("| `"):
            package, floor = (c.strip() for c in line.strip("|").split("|")[:2])
            floors[package.strip("`/")] = set(re.findall(r"`([a-z_]+)`", floor))
    for package, allowed in ALLOWED.items():
        row = SOURCES[package].relative_to(ROOT).as_posix()
        assert floors[row] == allowed - {package}, package


# One door into Tier 3 (tiers/semantic/store.py): the vector store's and the graph's write methods
# are called there and inside their own packages, nowhere else.
# The door, the stores behind it, and the vector store as the door hands it out (without the
# users being erased: tiers/semantic/erasures.py).
TIER3_DOOR = (
    "tiers/semantic/store.py",
    "tiers/semantic/erasures.py",
    "tiers/semantic/vectors/",
    "tiers/semantic/graph/",
)
ONLY_TIER3_WRITES = {"upsert", "set_valid_to", "close_edges", "remove_episodes"}
STORE_WRITES = {"add_edges", "remove_edges", "delete"}  # SemanticStore has two of these names


def _tier3_writes(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, receiver = node.func.attr, ast.unparse(node.func.value)
            if attr in ONLY_TIER3_WRITES or (
                attr in STORE_WRITES and receiver.endswith(("graph", "vectors"))
            ):
                yield node.lineno, f"{receiver}.{attr}"


def test_tier3_is_written_through_one_door():
    outside = [
        f"{path.relative_to(ROOT)}:{line} {call}"
        for path in MODULES.values()
        if not path.relative_to(ROOT).as_posix().startswith(TIER3_DOOR)
        for line, call in _tier3_writes(path)
    ]
    assert not outside, "write Tier 3 through tiers.semantic.store.SemanticStore:\n" + "\n".join(
        outside
    )


def test_the_door_check_sees_a_write_past_the_door(tmp_path: Path):
    module = tmp_path / "writer.py"
    module.write_text(
        "def f(s, v):\n    s.graph.add_edges([])\n    v.upsert([])\n    s.add_edges([])\n"
    )
    assert list(_tier3_writes(module)) == [(2, "s.graph.add_edges"), (3, "v.upsert")]


# Rooms inside the packages (docs/architecture.md, "Packages"): what a room's modules may
# import of the project, as module-name prefixes. The kernel imports nothing but itself, so
# every floor may import it; the disk's reserve (tiers.space) sits beside the RocksDB wrapper,
# which checks it; the client and the adapters import nothing of the server, so
# installing the client brings none of the daemon's dependencies.
ROOMS = {
    "tiers.core": ("tiers.core",),
    "tiers.semantic": ("tiers.core", "tiers.rocks", "tiers.space", "tiers.semantic"),
    # The change log: a kind of scoped data (tiers.scoped) that the stores below write into.
    "tiers.changes": (
        "tiers.core",
        "tiers.rocks",
        "tiers.space",
        "tiers.scoped",
        "tiers.semantic",
        "tiers.changes",
    ),
    # The journal, and the weaver's consolidation state: per scope, a kind of scoped data.
    "tiers.journal": (
        *("tiers.core", "tiers.rocks", "tiers.space", "tiers.scoped", "tiers.changes"),
        "tiers.journal",
    ),
    "tiers.working": (
        *("tiers.core", "tiers.rocks", "tiers.space", "tiers.changes", "tiers.journal"),
        "tiers.working",
    ),
    "tiers.workers": ("tiers.core", "tiers.semantic", "tiers.workers"),
    "tiers.keyed": (
        *(
            "tiers.core",
            "tiers.rocks",
            "tiers.space",
            "tiers.scoped",
            "tiers.journal",
            "tiers.semantic",
        ),
        *("tiers.changes", "tiers.keyed"),
    ),
    # The server imports the services, never the other way (the door sets the caller, the
    # services' tenancy reads it).
    "daemon.services": (
        *("tiers", "recall", "weaver"),
        *("daemon.services", "daemon.codec", "daemon.settings", "stratad_client.pb"),
    ),
    # The integrations: each over the client (and its framework, which no rule here reads).
    "stratad_client.integrations": ("stratad_client",),
    # The client: itself and its stubs, never an integration.
    "stratad_client": tuple(
        m for m in MODULES if m.startswith("stratad_client.") and ".integrations" not in m
    ),
}


def _outside_room(name: str) -> tuple[str, tuple[str, ...]] | None:
    for room, allowed in ROOMS.items():
        if name == room or name.startswith(room + "."):
            return room, allowed
    return None


def test_the_rooms_import_only_their_floors() -> None:
    wrong = []
    for name, path in MODULES.items():
        found = _outside_room(name)
        if found is None:
            continue
        room, allowed = found
        for target, line, _ in _imports(name, path):
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                where = f"{path.relative_to(ROOT)}:{line}"
                wrong.append(f"{where}: {name} (room {room}) imports {target}")
    assert not wrong, "imports out of their room's floor (ROOMS):\n" + "\n".join(
        dict.fromkeys(wrong)
    )


# "A folder per concept": a folder past about 15 modules has lost its concepts.
MAX_MODULES = 15


def test_no_folder_holds_more_than_about_15_modules() -> None:
    crowded = []
    for top in SIZED:
        for folder in [ROOT / top, *(p for p in sources(ROOT / top, ROOT, "*") if p.is_dir())]:
            where = folder.relative_to(ROOT).as_posix()
            n = len(list(folder.glob("*.py")))
            if n > MAX_MODULES and not where.startswith(NOT_SIZED[0].rstrip("/")):
                crowded.append(f"{where}/: {n} modules")
    assert not crowded, f"folders over {MAX_MODULES} modules:\n" + "\n".join(crowded)


# "Composition, not mixins": a class of the services or the weaver derives from one class at
# most (a generated servicer base, say); its parts are objects it is given. Errors aside: an
# error derives from its package's error and its kind.
COMPOSED = ("daemon/services", "weaver")


def _multiple_bases(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ClassDef) and len(node.bases) > 1:
            yield node.lineno, f"{node.name}({', '.join(ast.unparse(b) for b in node.bases)})"


def test_services_and_the_weaver_compose_their_parts() -> None:
    mixed = [
        f"{path.relative_to(ROOT)}:{line} {cls}"
        for top in COMPOSED
        for path in sources(ROOT / top, ROOT)
        for line, cls in _multiple_bases(path)
        if "Error" not in cls  # an error is its tier's error and a kind (tiers.core.errors)
    ]
    assert not mixed, "classes of several bases (compose the parts instead):\n" + "\n".join(mixed)


def test_the_mixin_check_sees_a_class_of_two_bases(tmp_path: Path) -> None:
    module = tmp_path / "service.py"
    module.write_text("class A(B, C):\n    pass\nclass D(E):\n    pass\n")
    assert list(_multiple_bases(module)) == [(1, "A(B, C)")]


# The client is a product of its own (``pip install stratad-client``): it imports nothing of the
# project but itself and the generated stubs, and of other packages only grpc and protobuf (the
# stdlib aside); the integrations, each with its framework, are not the client's base.
CLIENT_MAY_IMPORT = ("stratad_client", "grpc", "grpc_health", "google.protobuf")


def test_the_client_imports_only_itself_the_stubs_grpc_and_protobuf():
    wrong = []
    client = SOURCES["stratad_client"]
    for path in sources(client, ROOT):
        if path.is_relative_to(client / "integrations") or path.is_relative_to(client / "pb"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                allowed = any(name == m or name.startswith(m + ".") for m in CLIENT_MAY_IMPORT)
                if not allowed and (top in ALLOWED or top not in sys.stdlib_module_names):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not wrong, "\n".join(wrong)
