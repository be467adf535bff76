"""Compile mempp's kernels ahead of their first use: every signature the engine calls them with.

``signatures.txt`` beside this file lists them (module, function, argument types as numba
writes them), one per line, recorded from a run of the engine over every path it has
(``python -m mempp.bench.warmup --record``; ``tests/test_warm.py`` fails when the engine calls
a kernel with a signature the list lacks). :func:`compile_all` compiles each into numba's
cache (``jitcache``): ``pip install .`` runs it while it builds the package and ships the
result (``_precompiled/``), and ``mempp warmup`` runs it where a service is deployed.

Imports numpy and numba only.

Owns the signature list (:func:`signatures`, :func:`recorded`, :func:`merged`, :func:`type_text`)
and :func:`compile_all`, which skips the kernels of instruction sets this CPU lacks.

Never imports: mempp.storage, mempp.store, mempp.bench.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIGNATURES = HERE / "signatures.txt"


def signatures(path: Path = SIGNATURES) -> list[tuple[str, str, str]]:
    """(module, function, signature) of each line of ``path`` (``#`` comments and blank lines skipped)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            module, function, sig = line.split("\t")
            out.append((module, function, sig))
    return out


def compile_all(path: Path = SIGNATURES, verbose: bool = False) -> dict:
    """Compile (or load from the cache) every listed signature; ``{"compiled", "seconds"}``."""
    from numba.core import sigutils

    t = time.perf_counter()
    n = 0
    for module, function, sig in signatures(path):
        dispatcher = getattr(importlib.import_module(f"mempp.kernels.{module}"), function)
        if dispatcher is None:
            continue  # a kernel of an instruction set this CPU lacks (VNNI, AVX2): None here, never called
        args, _ = sigutils.normalize_signature(sig)
        t1 = time.perf_counter()
        dispatcher.compile(args)
        n += 1
        if verbose:
            print(f"{time.perf_counter() - t1:6.2f} s  {module}.{function}", flush=True)
    return {"compiled": n, "seconds": round(time.perf_counter() - t, 2)}


def merged(rows: list[tuple[str, str, str]], path: Path = SIGNATURES) -> list[tuple[str, str, str]]:
    """``rows`` (a recording) plus the lines already listed whose kernel still exists: a recording
    reaches only the kernels of this CPU (VNNI, AVX2 or the portable loop), so a list recorded on
    one machine keeps what another recorded. (A kernel that is None here, an instruction set this
    CPU lacks, is kept too.) To start over, empty the file first."""
    keep = []
    for module, function, sig in signatures(path) if path.exists() else []:
        if hasattr(importlib.import_module(f"mempp.kernels.{module}"), function):
            keep.append((module, function, sig))
    return sorted(set(rows) | set(keep))


def recorded(kernels_package) -> list[tuple[str, str, str]]:
    """Every signature mempp's dispatchers were compiled for in this process (entry points only:
    a signature with a literal argument is a callee's, compiled inside its caller)."""
    import pkgutil

    from numba.core.registry import CPUDispatcher

    out = set()
    for info in pkgutil.iter_modules(kernels_package.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{kernels_package.__name__}.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
                for sig in obj.signatures:
                    text = "(" + ", ".join(type_text(a) for a in sig) + ("," if len(sig) == 1 else "") + ")"
                    if "Literal" not in text:
                        out.add((info.name, name, text))
    return sorted(out)


def type_text(t) -> str:
    """A numba type as text ``numba.core.sigutils`` parses back to the same type."""
    from numba.core import sigutils, types

    if isinstance(t, types.Array):
        text = f"Array({t.dtype}, {t.ndim}, {t.layout!r}, readonly={not t.mutable}, aligned={t.aligned})"
    else:
        text = str(t)
    if "Literal" not in text:
        (back,), _ = sigutils.normalize_signature(f"({text},)")
        if back != t:
            raise ValueError(f"cannot write the numba type {t!r} as text (got back {back!r})")
    return text


if __name__ == "__main__":  # pragma: no cover - the build step runs this
    got = compile_all(verbose=bool(os.environ.get("MEMPP_WARM_VERBOSE")))
    print(f"mempp: {got['compiled']} kernel signatures compiled in {got['seconds']} s")
