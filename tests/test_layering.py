"""The layout of docs/DESIGN.md §7: engine -> storage -> kernels -> numpy, numba."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


def imports(folder: str) -> set[str]:
    out = set()
    for path in (ROOT / folder).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out.add(node.module)
    return out


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names} - STDLIB


def test_kernels_import_only_numpy_and_numba():
    # llvmlite is numba's own code generator (installed with it): the VNNI kernels emit LLVM intrinsics through it.
    assert top(imports("kernels")) <= {"numpy", "numba", "llvmlite"}


def test_storage_imports_no_engine():
    mods = imports("storage")
    assert top(mods) <= {"numpy", "pyarrow", "pyroaring", "snowballstemmer", "hnswlib", "xxhash", "mempp"}  # hnswlib: ANN index files (docs/DESIGN.md §4.4); xxhash: file checksums
    assert all(m.startswith("mempp.kernels") or m.startswith("mempp.storage") for m in mods if m.startswith("mempp"))


def code(path: Path) -> str:
    """A module's source without its docstring (which may name what the module never imports)."""
    tree = ast.parse(path.read_text())
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return "\n".join(path.read_text().splitlines()[first.end_lineno:])
    return path.read_text()


def test_engine_reaches_bench_only_from_the_cli():
    for path in (ROOT / "engine").glob("*.py"):
        if path.name != "commands.py":  # the subcommands eval, bench, demo and warmup
            assert "mempp.bench" not in code(path), path.name


def test_nothing_heavy_runs_at_import():
    import subprocess

    code = "import time, sys; t = time.perf_counter(); import mempp; print(time.perf_counter() - t, 'onnxruntime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "False"  # the model loads on first use, not at import


def engine_imports(name: str) -> set[str]:
    """The engine modules (``mempp.X`` or relative ``.X``) that ``engine/<name>.py`` imports."""
    out = set()
    for node in ast.walk(ast.parse((ROOT / "engine" / f"{name}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.level == 1:
                out.add(node.module.split(".")[0])
            elif node.level == 0 and node.module.startswith("mempp.") and node.module.split(".")[1] not in ("kernels", "storage"):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("mempp.") and a.name.split(".")[1] not in ("kernels", "storage"))
    return out


# The read path's stages (their module docstrings say what each owns): each imports only the
# stages before it, never the planner that runs them, fusion, or the store.
READ_PATH_STAGES = {
    "options": set(),
    "candidates": {"options"},
    "tags": {"candidates", "question_dates"},  # the periods a question names (a role's holder then)
    "lexical": {"options"},
    "vector": {"candidates", "options"},
    "vector_batch": {"candidates", "options", "vector"},
    "chain": {"lexical", "question_dates"},  # after fusion: the chain stage (BM25 of the ranked documents for a hit's rare terms; the days a text names)
    "threads": {"lexical", "fusion", "chain"},  # after fusion: the chain stage, the thread stage and the reserve's rule (BM25 scores of a few documents; fusion's order and selection)
    "feedback": {"vector"},  # after a first fusion: the feedback vector from stored vectors; the tag leg's order (the exact rescore)
}


# What the read path sits on (errors, dates, defaults, result types, caches, who may read): any stage may import these.
FOUNDATION = {"config", "dates", "errors", "types", "caches", "results", "access", "people"}


def test_read_path_stages_import_only_earlier_stages():
    for name, allowed in READ_PATH_STAGES.items():
        got = engine_imports(name) - FOUNDATION
        assert got <= allowed, (name, got - allowed)
    assert engine_imports("planner") - FOUNDATION <= set(READ_PATH_STAGES) | {"fusion"}
    assert "planner" not in engine_imports("threads")


# Every module of the three layers opens with a docstring that says what it owns and ends with
# one line naming what it must never import (so that a newcomer can read each module in one sitting).
PACKAGES = {"engine": "mempp", "storage": "mempp.storage", "kernels": "mempp.kernels"}
NEVER = re.compile(r"^Never imports: ([A-Za-z0-9_.]+(?:, [A-Za-z0-9_.]+)*)\.$")


def imported_names(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, as an absolute dotted name (``from X import a`` gives both
    ``X`` and ``X.a``: ``a`` may be a submodule), relative imports resolved against ``package``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names if a.name != "*")
    return out


def resolve(name: str, folder: str) -> str:
    """A name of a ``Never imports:`` line as an absolute module name: a dotted name as it is, a
    sibling module's name in the module's own package, anything else a top-level package."""
    if "." not in name and (ROOT / folder / f"{name}.py").exists():
        return f"{PACKAGES[folder]}.{name}"
    return name


def never_imports(doc: str) -> list[str]:
    match = NEVER.match(doc.rstrip().splitlines()[-1].strip())
    return match.group(1).split(", ") if match else []


def layer_modules() -> list[tuple[str, Path]]:
    return [(folder, path) for folder in PACKAGES for path in sorted((ROOT / folder).glob("*.py"))]


def test_every_module_says_what_it_owns_and_never_imports():
    problems = []
    for folder, path in layer_modules():
        where = f"{folder}/{path.name}"
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=True)
        if not doc:
            problems.append(f"{where}: no module docstring")
            continue
        if not re.search(r"\b[Oo]wns\b", doc):
            problems.append(f"{where}: the docstring does not say what the module owns")
        names = never_imports(doc)
        if not names:
            problems.append(f"{where}: the docstring does not end with a 'Never imports: a, b, c.' line")
        imported = imported_names(path, PACKAGES[folder])
        for name in names:
            forbidden = resolve(name, folder)
            if forbidden == f"{PACKAGES[folder]}.{path.stem}":
                problems.append(f"{where}: names itself ({name})")
            hits = sorted(m for m in imported if m == forbidden or m.startswith(forbidden + "."))
            if hits:
                problems.append(f"{where}: imports {', '.join(hits)}, which its docstring says it never imports ({name})")
    assert not problems, "\n".join(problems)


def test_never_imports_resolves_names_as_documented(tmp_path):
    # The parser itself, on a planted module: each import form is seen, siblings resolve in the package.
    src = tmp_path / "m.py"
    src.write_text("import a.b\nfrom . import store\nfrom .planner import run\nfrom ..kernels import topk\nfrom mempp.bench import speed\n")
    assert imported_names(src, "mempp.storage") == {
        "a.b", "mempp.storage", "mempp.storage.store", "mempp.storage.planner", "mempp.storage.planner.run",
        "mempp.kernels", "mempp.kernels.topk", "mempp.bench", "mempp.bench.speed",
    }
    assert resolve("store", "engine") == "mempp.store" and resolve("commits", "storage") == "mempp.storage.commits"
    assert resolve("onnxruntime", "engine") == "onnxruntime" and resolve("mempp.bench", "kernels") == "mempp.bench"
    assert never_imports("Owns x.\n\nNever imports: store, mempp.bench, onnxruntime.\n") == ["store", "mempp.bench", "onnxruntime"]
    assert never_imports("Owns x.\n\nNever imports: store.\n\nMore text.") == []


def test_without_the_ray_extra_mempp_works_and_distributed_names_it(tmp_path):
    # Ray made unimportable: mempp and mempp.distributed import, a store works, and each
    # distributed function (and the CLI's --ray commands) says which extra to install.
    import subprocess

    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import mempp\n"
        "from mempp import distributed\n"
        f"with mempp.Store.open({str(tmp_path / 's')!r}, embedder=mempp.HashEmbedder(8)) as s:\n"
        "    s.add([{'id': 'a', 'text': 'budget review'}])\n"
        "    assert s.query('budget')\n"
        "for call in (lambda: distributed.connect(), lambda: distributed.embed([]), lambda: distributed.score(s.path, ['budget'])):\n"
        "    try:\n        call()\n    except ImportError as exc:\n        print(exc)\n"
        "from mempp.cli import main\n"
        "sys.exit(main(['embed', 'docs.jsonl', '--out', 'x.parquet']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.stdout.count("pip install 'mempp[ray]'") == 3, proc.stdout + proc.stderr
    assert proc.returncode != 0 and "pip install 'mempp[ray]'" in proc.stderr, proc.stderr


def test_opening_a_store_and_a_query_do_not_load_pandas(tmp_path):
    """pyarrow's ``to_numpy`` and Python-scalar conversions load pandas when it is installed (a
    third of a second of a fresh process): the open and query paths read Arrow buffers instead."""
    import subprocess

    code = (
        "import sys, mempp\n"
        "s = mempp.Store.open(sys.argv[1], embedder=mempp.HashEmbedder(dim=8))\n"
        "s.add([{'id': f'd{i}', 'text': f'note {i}', 'author': 'Ann Lee', 'date': '2024-01-02' if i % 3 else None, 'thread': 't'} for i in range(70)])\n"
        "s.add([{'id': 'd1', 'text': 'note one, revised', 'date': '2024-02-01'}])\n"
        "s.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], check=True)
    check = (
        "import sys, mempp\n"
        "s = mempp.Store.open(sys.argv[1], read_only=True, embedder=mempp.HashEmbedder(dim=8))\n"
        "hits = s.query('note one', k=3, as_of='2024-03-01', authors=['Ann Lee'])\n"
        "print(len(hits), 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", check, str(tmp_path / "s")], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["3", "False"], out


# No import cycles among the modules of engine/, storage/, kernels/ and bench/, counting the
# imports inside functions too: a lazy import breaks the cycle at import time but not for the
# reader, who must then understand both modules before either (as bench/speed.py and
# bench/distributed.py once did: the shared piece, the workload's store, now lives in workload.py).
FOLDERS = {**PACKAGES, "bench": "mempp.bench"}


def module_graph(folders: dict[str, str], root: Path = ROOT) -> dict[str, set[str]]:
    """Module name -> the modules of ``folders`` it imports anywhere in its code (a package's
    ``__init__`` is the package's own name)."""
    files = {}
    for folder, package in folders.items():
        for path in sorted((root / folder).glob("*.py")):
            files[package if path.stem == "__init__" else f"{package}.{path.stem}"] = (path, package)
    return {name: {m for m in imported_names(path, package) if m in files and m != name} for name, (path, package) in files.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_import_cycles_among_the_modules():
    cycles = import_cycles(module_graph(FOLDERS))
    assert not cycles, "modules that import each other (directly or through others): " + "; ".join(" <-> ".join(c) for c in cycles)


def test_import_cycles_are_found_inside_functions_too(tmp_path):
    # Planted: a imports b at the top, b imports a inside a function, c imports a alone.
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "a.py").write_text("from .b import run\n")
    (tmp_path / "bench" / "b.py").write_text("def run():\n    from .a import x\n")
    (tmp_path / "bench" / "c.py").write_text("from mempp.bench import a\n")
    graph = module_graph({"bench": "mempp.bench"}, tmp_path)
    assert graph == {"mempp.bench.a": {"mempp.bench.b"}, "mempp.bench.b": {"mempp.bench.a"}, "mempp.bench.c": {"mempp.bench.a"}}
    assert import_cycles(graph) == [["mempp.bench.a", "mempp.bench.b"]]


# No module uses another module's private name: a ``_name`` is imported by nobody, and an
# attribute ``x._name`` is read only in the module that defines ``_name`` (its own objects).
# What a third-party library leaves only under a private name is listed here, with the reason.
FOREIGN_PRIVATE = {
    "_exit": "os._exit: the crash tests' and the lock holder's hard exit",
    "_replace": "the NamedTuple API",
    "_asdict": "the NamedTuple API",
    "_fields": "the NamedTuple API",
    "_locator_classes": "numba: the cache locators, where kernels/jitcache.py puts its own first",
    "_SourceFileBackedLocatorMixin": "numba: the locator base class jitcache.py extends",
    "_py_func": "numba: the function a cache belongs to (jitcache.py skips an unwritable cache file for mempp's own only)",
    "_actions": "argparse: the parser's arguments, which the CLI's help test walks",
    "_group_actions": "argparse: a subcommand group's parsers (the same walk)",
    "_subparsers": "argparse: the subcommands (the same walk)",
}


def defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, attributes it assigns, arguments,
    variables, import aliases, and ``__slots__`` entries."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_"):
            names.add(node.value)
    return names


def private_crossings(path: Path) -> list[str]:
    """Where ``path`` imports a private name or reads a private attribute it does not define."""
    tree = ast.parse(path.read_text())
    own = defined_names(tree)

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.extend(f"line {node.lineno}: imports {a.name}" for a in node.names if private(a.name))
            if node.module and any(private(part) for part in node.module.split(".")):
                out.append(f"line {node.lineno}: imports from the private module {node.module}")
        elif isinstance(node, ast.Import):
            out.extend(f"line {node.lineno}: imports {a.name}" for a in node.names if any(private(p) for p in a.name.split(".")))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and private(node.attr):
            if node.attr not in own and node.attr not in FOREIGN_PRIVATE:
                out.append(f"line {node.lineno}: reads .{node.attr}, defined elsewhere")
    return sorted(out, key=lambda p: int(p.split()[1].rstrip(":")))


def test_no_module_uses_another_modules_private_name():
    problems = []
    for folder in [*FOLDERS, "tests"]:
        for path in sorted((ROOT / folder).rglob("*.py")):
            problems.extend(f"{path.relative_to(ROOT)}: {p}" for p in private_crossings(path))
    assert not problems, "\n".join(problems)


def test_private_crossings_are_found(tmp_path):
    # Planted: each form of reaching into another module, and what a module may do with its own names.
    src = tmp_path / "m.py"
    src.write_text(
        "from .a import _hidden, shown\nfrom ._impl import thing\nimport pkg._impl\n"
        "class C:\n    def __init__(self):\n        self._mine = 1\n    def f(self, other):\n"
        "        return self._mine + other._theirs + _helper()\n"
        "def _helper():\n    return store._snap\n"
    )
    got = private_crossings(src)
    assert got == [
        "line 1: imports _hidden", "line 2: imports from the private module _impl", "line 3: imports pkg._impl",
        "line 8: reads ._theirs, defined elsewhere", "line 10: reads ._snap, defined elsewhere",
    ], got


def test_every_module_is_under_600_lines():
    # One sitting's reading: a module that outgrows it is split by what it owns.
    long = [f"{p.relative_to(ROOT)}: {n}" for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) >= 600]
    assert not long, "modules of 600 lines or more: " + ", ".join(long)
