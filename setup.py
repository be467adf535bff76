"""Build hook: compile mempp's numba kernels while the package is built, and ship them.

``pip install .`` then gives a package whose first use loads compiled kernels instead of
compiling them (tens of seconds on a small machine): ``kernels/precompile.py`` compiles every
signature the engine uses (``kernels/signatures.txt``) into a scratch numba cache, whose files
go into the package as ``mempp/kernels/_precompiled/``; at first import they are copied into the
user's cache (``kernels/jitcache.py``), where numba checks each against its source file and
the CPU and compiles again only what does not match. An editable install compiles nothing
here (its kernels compile on first use). ``MEMPP_NO_PRECOMPILE=1`` skips the step; a failure of
it only warns. Everything else is in pyproject.toml.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# Imports mempp.kernels without mempp/__init__.py (whose imports the build environment lacks).
COMPILE = """
import sys, types
pkg = types.ModuleType("mempp")
pkg.__path__ = [sys.argv[1]]
sys.modules["mempp"] = pkg
from mempp.kernels import precompile
got = precompile.compile_all()
print(f"mempp: {got['compiled']} kernel signatures compiled in {got['seconds']} s", flush=True)
"""


class BuildWithKernels(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("MEMPP_NO_PRECOMPILE"):
            return
        package = Path(self.build_lib) / "mempp"
        target = package / "kernels" / "_precompiled"
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, XDG_CACHE_HOME=cache)
            env.pop("NUMBA_CACHE_DIR", None)
            try:
                subprocess.run([sys.executable, "-c", COMPILE, str(package)], env=env, check=True)
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"mempp: kernels not compiled ahead ({exc}); they compile on first use", file=sys.stderr)
                return
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(cache) / "mempp" / "numba" / "kernels", target)


setup(cmdclass={"build_py": BuildWithKernels})
