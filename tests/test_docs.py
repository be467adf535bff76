"""The reference pages say what the code does: every default written in ``docs/API.md`` is the
signature's, and every keyword it names exists."""

from __future__ import annotations

import ast
import inspect
import re

import mempp
import pytest

from conftest import ROOT

API = ROOT / "docs" / "API.md"


def documented_calls() -> list[tuple[str, str]]:
    """(``Store.open`` or ``store.method``, the argument text) of every call written in backticks."""
    text = API.read_text()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"`((?:Store|store)\.\w+)\(([^`]*?)\)`", text, re.S)]


def parse_args(args: str) -> tuple[list[str], dict[str, object]]:
    """The bare parameter names and the ``name=default`` pairs of a documented argument list."""
    args = re.sub(r"(?<![\w.*])\*\s*,", "", " ".join(args.split())).replace(", **options", "")
    call = ast.parse(f"f({args})", mode="eval").body
    names = [a.id for a in call.args if isinstance(a, ast.Name)]
    return names, {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def normal(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def test_every_documented_default_is_the_code_s():
    calls = documented_calls()
    assert {"Store.open", "store.add", "store.query", "store.query_batch", "store.build_ann", "store.supersede"} <= {c for c, _ in calls}
    checked = 0
    for name, args in calls:
        names, defaults = parse_args(args)
        sig = inspect.signature(getattr(mempp.Store, name.split(".")[1]))
        for p in names + list(defaults):
            assert p in sig.parameters, f"{name}: no parameter {p!r}"
        for key, value in defaults.items():
            assert normal(sig.parameters[key].default) == normal(value), f"{name}({key}=...): docs say {value!r}, code {sig.parameters[key].default!r}"
            checked += 1
    assert checked >= 40


DESIGN = ROOT / "docs" / "DESIGN.md"
CITED = ("engine", "storage", "kernels", "bench", "tests", "docs")


def design_sections() -> set[str]:
    """The numbers of docs/DESIGN.md's sections (``## 3. Read path`` -> "3", ``### 3.4 Fusion`` -> "3.4")."""
    return {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DESIGN.read_text(), re.M)}


def test_every_design_citation_names_a_section_of_docs_design():
    sections = design_sections()
    assert {str(n) for n in range(1, 9)} <= sections  # data model .. access
    files = [ROOT / "README.md"] + [p for folder in CITED for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md")]
    bad, cited = [], 0
    for path in files:
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT)
        for m in re.finditer(r"DESIGN(?:\.md)?[`\]()\w./]*\s*((?:§\s*[\d.–-]+(?:,\s*)?)+)", text):
            cited += 1
            for number in re.split(r"[–-]|,?\s*§\s*", m.group(1)):
                number = number.strip(" ,.")
                if number and number not in sections:
                    bad.append(f"{where}: §{number}")
            if "DESIGN.md" not in m.group(0):
                bad.append(f"{where}: '{m.group(0)}' (cite docs/DESIGN.md, the file)")
    assert cited >= 15 and not bad, bad


@pytest.mark.model  # the first block opens a store with the default model
def test_the_python_blocks_of_the_api_page_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", API.read_text(), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(API), "exec"), {})
