"""Build glue for `pip install ./python`: CMake configures the slabfeed
source tree (the parent of this directory) and builds the target
slabfeed_python, i.e. the C library (static, linked into the extension) and
slabfeed/_slabfeed.abi3.so; setuptools packages it with the pure-Python
files. Works offline. Environment: SLABFEED_CMAKE_ARGS (extra CMake
arguments, e.g. "-DSLABFEED_CUDA=OFF -DHDF5_ROOT=..."), CMAKE (the cmake
executable), CMAKE_BUILD_PARALLEL_LEVEL (build jobs)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def project_version() -> str:
    """VERSION of project() in the top-level CMakeLists.txt."""
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*slabfeed\s+VERSION\s+([0-9.]+)", text)
    if m is None:
        raise RuntimeError(f"no project(slabfeed VERSION ...) in {ROOT / 'CMakeLists.txt'}")
    return m.group(1)


class CMakeBuild(build_ext):
    """Builds the extension with the project's CMake instead of distutils."""

    def build_extension(self, ext: Extension) -> None:
        cmake = os.environ.get("CMAKE", "cmake")
        if shutil.which(cmake) is None:
            raise RuntimeError("slabfeed: cmake (3.24+) is needed to build; set CMAKE=/path/to/cmake")
        build = Path(self.build_temp).resolve() / "cmake"
        config = ["-S", str(ROOT), "-B", str(build),
                  "-DCMAKE_BUILD_TYPE=Release", "-DSLABFEED_PYTHON=ON",
                  "-DSLABFEED_TESTS=OFF", f"-DPython3_EXECUTABLE={sys.executable}"]
        config += shlex.split(os.environ.get("SLABFEED_CMAKE_ARGS", ""))
        subprocess.run([cmake, *config], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run([cmake, "--build", str(build), "--target", "slabfeed_python",
                        "--parallel", jobs], check=True)
        built = build / "python" / "slabfeed" / "_slabfeed.abi3.so"
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


setup(
    version=project_version(),
    ext_modules=[Extension("slabfeed._slabfeed", sources=[], py_limited_api=True)],
    cmdclass={"build_ext": CMakeBuild},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
