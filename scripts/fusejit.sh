#!/usr/bin/env bash
# One entry point for a fresh machine: installs what is missing, builds, then
#   scripts/fusejit.sh demo   runs the main job on an example spec
#   scripts/fusejit.sh test   runs the test suite (ctest)
#   scripts/fusejit.sh build  only builds
# The CLI ends up at build/fusejit. BUILD_DIR overrides the build folder.
# Without a GPU the demo runs seed 3 at a reduced batch on the LLVM CPU backend
# (docs/cpu.md) when the build has it (LLVM 14 found; installed below).
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-demo}
build=${BUILD_DIR:-build}
cuda=${CUDA_HOME:-/usr/local/cuda}

have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }

install_missing() {
  local pkgs=()
  command -v cmake >/dev/null || pkgs+=(cmake)
  command -v g++ >/dev/null || pkgs+=(g++)
  command -v ninja >/dev/null || pkgs+=(ninja-build)
  have_header yaml-cpp/yaml.h || pkgs+=(libyaml-cpp-dev)
  # the CPU backend (docs/cpu.md): LLVM 14's CMake package and libLLVM-14.so
  [ -e /usr/lib/llvm-14/lib/cmake/llvm/LLVMConfig.cmake ] || pkgs+=(llvm-14-dev)
  have_header gtest/gtest.h || [ -e /usr/src/googletest/CMakeLists.txt ] || pkgs+=(libgtest-dev)
  command -v python3 >/dev/null || pkgs+=(python3)
  python3 -c "import pytest" 2>/dev/null || pkgs+=(python3-pytest)   # the Python bridge's tests
  have_header hiredis/hiredis.h || pkgs+=(libhiredis-dev)   # the remote cache tier (docs/cache.md)
  have_header openssl/hmac.h || pkgs+=(libssl-dev)           # its HMAC-SHA256
  command -v redis-server >/dev/null || pkgs+=(redis-server) # its tests start one
  # pip install ./python in a venv (ctest python_package_test), with Debian's python3
  /usr/bin/python3 -c "import venv, ensurepip" 2>/dev/null || pkgs+=(python3-venv)
  /usr/bin/python3 -c "import pip" 2>/dev/null || pkgs+=(python3-pip)
  /usr/bin/python3 -c "import setuptools" 2>/dev/null || pkgs+=(python3-setuptools)
  /usr/bin/python3 -c "import wheel" 2>/dev/null || pkgs+=(python3-wheel)
  command -v pkg-config >/dev/null || pkgs+=(pkg-config)   # examples/consumer's fusejit.pc check
  if ((${#pkgs[@]})); then
    echo "== installing: ${pkgs[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${pkgs[@]}"
  fi
  if [ ! -x "$cuda/bin/nvcc" ] && [ ! -e "$cuda/include/nvrtc.h" ]; then
    echo "error: the CUDA 13 toolkit (NVRTC, cuda.h) is needed at $cuda (set CUDA_HOME)" >&2
    exit 1
  fi
}

configure_and_build() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda"
  fi
  cmake --build "$build" -j "$(nproc)"
}

gpu_present() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; }

install_missing
configure_and_build

case "$action" in
  build) ;;
  demo)
    spec=examples/seed3_conv_tanh_scale_bias_maxpool.yaml
    echo "== fusejit validate examples/*.yaml"
    "$build/fusejit" validate examples/*.yaml
    if gpu_present; then
      echo "== fusejit run $spec"
      "$build/fusejit" run "$spec"
    else
      echo "== fusejit compile $spec --arch sm_90a -o $build/seed3.cubin"
      "$build/fusejit" compile "$spec" --arch sm_90a -o "$build/seed3.cubin"
      if "$build/fusejit" emit --backend cpu --plan "$spec" >/dev/null 2>&1; then
        # The CPU backend (LLVM): the same chain at batch 2 instead of 128, so
        # that it and its fp64 check take seconds on a few cores.
        echo "== fusejit run --backend cpu --batch 2 $spec   (no GPU here: the LLVM CPU backend)"
        "$build/fusejit" run --backend cpu --batch 2 --iters 10 "$spec"
        echo "(on a GPU machine this command runs the full size there: $build/fusejit run $spec)"
      else
        echo "(no GPU here and no CPU backend in this build: executing the kernel and checking it"
        echo " against the fp64 reference needs one; on a GPU machine this command runs:"
        echo " $build/fusejit run $spec)"
      fi
    fi
    ;;
  test)
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
    ;;
  *)
    echo "usage: scripts/fusejit.sh demo|test|build" >&2
    exit 2
    ;;
esac
