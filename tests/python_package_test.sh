#!/usr/bin/env bash
# ctest python_package_test: pip installs python/ into a fresh venv (offline,
# --no-build-isolation) with the library from an existing CMake build, then
# imports fusejit with no environment variables and compiles a spec to a CUBIN.
#   tests/python_package_test.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
python=$1 src=$2 build=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A copy of python/ (and the version's source), so the checkout gets no build/ or egg-info.
mkdir -p "$work/src"
cp "$src/CMakeLists.txt" "$work/src/"
cp -r "$src/python" "$work/src/python"
rm -rf "$work/src/python/tests" "$work/src/python/build" "$work/src/python/fusejit/"*.so

"$python" -m venv --system-site-packages --without-pip "$work/venv"
FUSEJIT_BUILD_DIR="$build" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$work/venv/bin/python" -m pip install -q --no-build-isolation "$work/src/python"

cd "$work"  # not the checkout: the installed package must be the one imported
env -u FUSEJIT_LIB FUSEJIT_CACHE_DIR="$work/cache" "$work/venv/bin/python" - <<'PY'
import pathlib
import fusejit
pkg = pathlib.Path(fusejit.__file__).parent
assert "site-packages" in str(pkg), pkg
assert (pkg / "libfusejit_c.so").exists(), list(pkg.iterdir())
for source in ("launcher.h", "launcher.cpp", "launcher_autograd.cpp"):  # the opt-in C++ launchers' sources
    assert (pkg / "csrc" / source).exists(), source
spec = fusejit.Spec("""
name: pip_linear_relu
precision: fp32
inputs:
  - {name: x, shape: [128, 256]}
  - {name: w, shape: [512, 256]}
ops:
  - {name: gemm, op: linear, args: [x, w]}
  - {name: y, op: relu, args: [gemm]}
outputs: [y]
""")
cubin = fusejit.compile_cubin(spec, arch="sm_90a")
assert cubin[:4] == b"\x7fELF", cubin[:4]
print(f"fusejit {fusejit.version()} from {pkg}: {len(cubin)} bytes of sm_90a CUBIN")
PY
