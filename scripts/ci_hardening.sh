#!/usr/bin/env bash
# Hardening jobs (docs/hardening.md), after the normal test suite in .ci/run:
#   asan   ASan+UBSan build of the CPU suite, ctest (GPU tests skip)
#   tsan   TSan build, the concurrency stress tests
#   fuzz   libFuzzer targets (clang-14), each FUZZ_SECONDS (60) from tests/fuzz/corpus
# scripts/ci_hardening.sh [asan] [tsan] [fuzz]   (default: all three)
# Build folders: $HARDEN_BUILD_ROOT/build-{asan,tsan,fuzz} (default: build-harden).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${HARDEN_BUILD_ROOT:-build-harden}
cuda=${CUDA_HOME:-/usr/local/cuda}
fuzz_seconds=${FUZZ_SECONDS:-60}
jobs=$(nproc)
stages=("$@")
((${#stages[@]})) || stages=(asan tsan fuzz)

install_missing() {
  local pkgs=()
  command -v clang++-14 >/dev/null || pkgs+=(clang-14)
  [ -n "$(ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] ||
    pkgs+=(libclang-rt-14-dev)   # libFuzzer and the sanitizer runtimes for clang
  command -v llvm-symbolizer-14 >/dev/null || pkgs+=(llvm-14)  # symbolized reports
  command -v setarch >/dev/null || pkgs+=(util-linux)
  if ((${#pkgs[@]})); then
    echo "== installing: ${pkgs[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${pkgs[@]}"
  fi
}

configure() {  # dir, extra cmake args...
  local dir=$1; shift
  [ -f "$dir/CMakeCache.txt" ] ||
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT="$cuda" "$@"
}

# TSan (and ASan) need a low-entropy address layout on some kernels: no ASLR.
no_aslr() { if setarch "$(uname -m)" -R true 2>/dev/null; then setarch "$(uname -m)" -R "$@"; else "$@"; fi; }

export ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer-14 || true)
stage_asan() {
  local b=$root/build-asan
  configure "$b" -DFUSEJIT_SANITIZE=address,undefined
  cmake --build "$b" -j "$jobs"
  # The Python bridge test loads the ASan library into an uninstrumented python: skipped here.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
  LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    no_aslr ctest --test-dir "$b" --output-on-failure -j "$jobs" -E '^python_bridge_test$'
}

stage_tsan() {
  local b=$root/build-tsan
  configure "$b" -DFUSEJIT_SANITIZE=thread
  cmake --build "$b" -j "$jobs" --target fusejit_tsan_tests
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp \
    no_aslr "$b/tests/fusejit_tsan_tests" --gtest_filter='Stress.*:RuntimeEngine.*:EngineDiskCache.*:DiskCache.*:Tuner.*'
}

stage_fuzz() {
  local b=$root/build-fuzz
  configure "$b" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DFUSEJIT_BUILD_FUZZERS=ON -DFUSEJIT_BUILD_TESTS=OFF
  cmake --build "$b" -j "$jobs" --target fuzz_spec fuzz_ir_text fuzz_cache_entry
  for t in spec ir_text cache_entry; do
    local work=$b/fuzz/work-$t
    mkdir -p "$work"   # new inputs go here; the committed corpus is only read
    local log=$b/fuzz/fuzz_$t.log rc=0
    echo "== fuzz_$t for ${fuzz_seconds}s"
    "$b/fuzz/fuzz_$t" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$b/fuzz/crash-$t-" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
    grep -E '^Done [0-9]+ runs|stat::number_of_executed_units' "$log" || true
    if [ "$rc" -ne 0 ]; then
      tail -n 60 "$log" >&2
      echo "fuzz_$t failed (rc $rc; the input is in $b/fuzz/crash-$t-*)" >&2
      return 1
    fi
  done
}

install_missing
for s in "${stages[@]}"; do
  case "$s" in
    asan|tsan|fuzz) echo "== hardening: $s"; start=$SECONDS; "stage_$s"; echo "== $s: $((SECONDS - start)) s" ;;
    *) echo "usage: scripts/ci_hardening.sh [asan] [tsan] [fuzz]" >&2; exit 2 ;;
  esac
done
