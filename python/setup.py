"""setuptools glue for python/pyproject.toml: puts libfusejit_c.so inside the
fusejit package.

The library comes from $FUSEJIT_BUILD_DIR/capi (an existing CMake build of the
repository: nothing is compiled), else CMake configures the repository in
python/build/cmake and builds only the fusejit_c target ($FUSEJIT_CMAKE_ARGS
adds configure options, e.g. -DCUDAToolkit_ROOT=...).
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIB_NAME = "libfusejit_c.so"


def version():
    cml = ROOT / "CMakeLists.txt"
    if cml.exists():
        m = re.search(r"project\(fusejit\s+VERSION\s+([0-9.]+)", cml.read_text())
        if m:
            return m.group(1)
    return "0.0.0"


def built_library():
    """The path of a built libfusejit_c.so (building it when needed)."""
    given = os.environ.get("FUSEJIT_BUILD_DIR")
    if given:
        lib = Path(given).resolve() / "capi" / LIB_NAME
        if not lib.exists():
            raise SystemExit(f"FUSEJIT_BUILD_DIR={given}: no {lib} (build the fusejit_c target)")
        return lib
    if not (ROOT / "capi" / "CMakeLists.txt").exists():
        raise SystemExit("fusejit: not in a fusejit checkout; set FUSEJIT_BUILD_DIR to a CMake build")
    build = HERE / "build" / "cmake"
    configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 "-DFUSEJIT_BUILD_TESTS=OFF"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    configure += shlex.split(os.environ.get("FUSEJIT_CMAKE_ARGS", ""))
    if not (build / "CMakeCache.txt").exists():
        subprocess.run(configure, check=True)
    subprocess.run(["cmake", "--build", str(build), "--target", "fusejit_c",
                    "-j", str(os.cpu_count() or 1)], check=True)
    return build / "capi" / LIB_NAME


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        dest = Path(self.build_lib) / "fusejit" / LIB_NAME
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built_library().resolve(), dest)  # the file, not the soname link
        dest.chmod(0o755)


class BinaryDistribution(Distribution):
    """A platform wheel: the package holds a native library."""

    def has_ext_modules(self):
        return True


setup(version=version(), cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
