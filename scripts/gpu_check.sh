#!/usr/bin/env bash
# One call on the GPU machine: native build with ninja, the GPU tests, the seed
# specs at full size, every example, compute-sanitizer on the seeds at reduced
# size. Full logs go to $OUT (or ./gpu-out; at most 8 files: device, build,
# ctest, runs, memcheck, summary); a short table is printed last.
#   scripts/gpu_check.sh [quick]     quick: skip the sanitizer
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
build=${BUILD_DIR:-build-gpu}
mode=${1:-full}
summary=()
note() { summary+=("$1"); }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  git log -1 --oneline 2>/dev/null || true
} | tee "$out/device.txt"

t0=$(date +%s)
if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT=/usr/local/cuda \
     > "$out/build.log" 2>&1 && cmake --build "$build" -j 16 >> "$out/build.log" 2>&1; then
  note "build: ok ($(( $(date +%s) - t0 )) s)"
else
  note "build: FAILED (see build.log)"; tail -40 "$out/build.log"; printf '%s\n' "${summary[@]}"; exit 1
fi

ctest --test-dir "$build" -j 4 --output-on-failure --timeout 900 > "$out/ctest.log" 2>&1
note "ctest: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
grep -E "^\s*[0-9]+ - |Failed|\*\*\*" "$out/ctest.log" | head -30

for spec in examples/*.yaml; do
  name=$(basename "$spec" .yaml)
  iters=20; case "$name" in seed*) iters=30;; esac
  log=$(mktemp)
  if timeout 300 "$build/fusejit" run "$spec" --iters $iters > "$log" 2>&1; then r=PASS; else r="FAIL(rc=$?)"; fi
  { echo "== fusejit run $spec"; cat "$log"; } >> "$out/runs.log"
  case "$name" in seed*) cat "$log";; esac
  ms=$(grep -o 'median [0-9.]* ms' "$log" | head -1)
  err=$(grep -o 'rel_l2 [0-9.e+-]*' "$log" | head -1)
  note "run $name: $r $ms $err"
  rm -f "$log"
done

if [ "$mode" != quick ] && command -v compute-sanitizer >/dev/null; then
  for spec in tests/specs/seed*_small.yaml; do
    name=$(basename "$spec" .yaml)
    log=$(mktemp)
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/fusejit" run "$spec" --no-time \
      > "$log" 2>&1
    rc=$?
    { echo "== memcheck $spec"; cat "$log"; } >> "$out/memcheck.log"
    note "memcheck $name: $( [ $rc -eq 0 ] && echo clean || echo "rc=$rc" ) $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$log" | tail -1)"
    rm -f "$log"
  done
fi

echo; echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
