"""The README's Python example runs as written and prints what its comment says."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.model
def test_readme_python_example(tmp_path):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert out.getvalue() == "[2023-01-10] Aisha Patel:\nUptime SLA: 99.9%.\n"
    assert (tmp_path / "org.mempp" / "CURRENT").is_file()
