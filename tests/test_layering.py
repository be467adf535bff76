"""The dependency direction of DESIGN §5: engine -> storage -> kernels -> numpy, numba."""

from __future__ import annotations

import ast
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
    assert top(mods) <= {"numpy", "pyarrow", "pyroaring", "snowballstemmer", "hnswlib", "xxhash", "mempp"}  # hnswlib: ANN index files (DESIGN §5); xxhash: file checksums
    assert all(m.startswith("mempp.kernels") or m.startswith("mempp.storage") for m in mods if m.startswith("mempp"))


def test_engine_reaches_bench_only_from_the_cli():
    for path in (ROOT / "engine").glob("*.py"):
        if path.name != "cli.py":
            assert "mempp.bench" not in path.read_text(), path.name


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
    "tags": {"candidates"},
    "lexical": {"options"},
    "vector": {"candidates", "options"},
    "vector_batch": {"candidates", "options", "vector"},
    "threads": {"lexical"},  # after fusion: the thread stage and the reserve's rule (BM25 scores of a few documents)
}


def test_read_path_stages_import_only_earlier_stages():
    for name, allowed in READ_PATH_STAGES.items():
        assert engine_imports(name) <= allowed, (name, engine_imports(name) - allowed)
    assert engine_imports("planner") <= set(READ_PATH_STAGES) | {"fusion", "types"}
    assert "fusion" not in engine_imports("threads") and "planner" not in engine_imports("threads")


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
