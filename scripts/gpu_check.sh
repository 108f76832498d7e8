#!/usr/bin/env bash
# The GPU machine's check, in stages (each device call runs some of them and
# must stay under 10 minutes; a warm machine keeps the build between calls):
#   build     native build with ninja (incremental); BUILD_TARGETS limits it, e.g. "fusejit_c fusejit"
#             for the python / bench stages alone (about two thirds of the compile jobs: no test binaries)
#   test      ctest: every test, GPU tests included (autotune excluded)
#   runs      `fusejit run` on every example, the seeds at full size
#   memcheck  compute-sanitizer memcheck on the seeds at reduced size
#   sanitize  compute-sanitizer memcheck, racecheck and initcheck on every
#             example (tests/specs/<name>_small.yaml where one exists, the
#             seeds' seedN_small.yaml), one launch each; SANITIZE_TOOLS picks
#             tools (e.g. "racecheck") to split it over device calls, SANITIZE_SPECS other
#             specs, SANITIZE_CONFIGS codegen configs (';'-separated, each spec under each)
#   tune      `fusejit tune` on the three seeds + the GPU autotune test
#   python    the C API test and the Python bridge's pytest suite
#   gemm      the GEMM mainloop tests (GpuGemm, CodegenWgmma, CodegenGemmMma: SASS + spills) and
#             `fusejit run` on linear chains of the GEMM bench shapes, each mode
#   bench     bench/bench.py against PyTorch (BENCH_ARGS passes options)
#   gemmbench bench/bench_gemm.py against cuBLAS / PyTorch (GEMM_BENCH_ARGS)
#   convbench bench/bench_conv.py: conv chains against cuDNN / PyTorch (CONV_BENCH_ARGS)
#   normbench bench/bench_norm.py: group norm / row reduction chains against PyTorch (NORM_BENCH_ARGS)
#   gtest     ctest -R TEST_REGEX (default '^Gpu|/Gpu'), -E TEST_EXCLUDE, GTEST_JOBS in parallel,
#             GTEST_TIMEOUT seconds a test (default 500): one call for the tests a change needs
#   wgrad     `fusejit run` on the seeds' dW (conv2d_weight_grad) at full size, each mode
#             (WGRAD_MODES, WGRAD_CONFIG)
#   backbench bench/bench_backward_seeds.py: seed models' forward + backward against eager / torch.compile
#             (BACKWARD_BENCH_ARGS, e.g. "--seeds 3 --modes fp32")
#   swapab    `fusejit run` of fp32-operand matmuls with B [K, N] (seed 2's tf32 dX / dW, bench/specs_matmul_tf32),
#             swap-AB against the transposed copy (wgmma_swap_ab=0), SWAPAB_ITERS trials each
#   abrun     `fusejit run` of ABRUN_SPECS (default bench/specs_transpose/*.yaml) under each config of
#             ABRUN_CONFIGS (';'-separated, default "" and "epilogue_transpose=0"), in turn; ABRUN_SAMPLES
#             (default 20000) outputs checked against fp64 a run (fewer for long reductions: a dW's K is every pixel)
#   ncu       ncu's headline sections (duration, SM and DRAM throughput, IPC, stalls) of `fusejit run` on NCU_SPECS
#             under each of NCU_CONFIGS (';'-separated), kernels matching NCU_KERNEL (default fj_), NCU_SKIP
#             launches skipped, NCU_COUNT profiled; NCU_TORCH (space-separated MxKxN:dtype) adds cuBLAS's F.linear
#   ncusass   ncu's PC sampling per SASS instruction of one kernel a run (NCU_SPECS x NCU_CONFIGS, NCU_KERNEL,
#             NCU_SKIP): bench/ncu_sass_stalls.py's top stalls, mainloop vs epilogue (NCUSASS_SPLIT), ncusass_N.txt
#   profile   bench/profile_backward.py: torch.profiler's kernel table of a training step; PROFILE_RUNS holds
#             one argument list a run, separated by ';' (default "--seed 2 --mode bf16 --gaps --flush")
#   stamps    bench/profile_stamps.py: host timestamps inside a seed model's training step, fusejit and eager
#             (STAMPS_ARGS, default "--seed 2 --mode bf16")
# *_ARGS variables are split at spaces and passed as they are: no quotes inside them
# (GEMM_BENCH_ARGS="--fusejit-configs a=tma_store=1;b=tma_store=0", not '...').
# FUSEJIT_COMMIT=<hash>: the commit to print and record in bench results (the device's .git can lag the tree).
#   scripts/gpu_check.sh build test runs memcheck
# Logs go to $OUT (or ./gpu-out), one file per stage; a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
build=${BUILD_DIR:-build}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build test runs memcheck)
summary=()
note() { summary+=("$1"); echo "-- $1"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
# The device's copy of .git can lag the tree sent: FUSEJIT_COMMIT (set in the run's command, e.g. from
# `git rev-parse --short HEAD` here) names the tree instead, and goes to the bench scripts' --commit.
echo "commit: ${FUSEJIT_COMMIT:-$(git log -1 --oneline 2>/dev/null || echo '?')}"
commit_arg=${FUSEJIT_COMMIT:+--commit $FUSEJIT_COMMIT}

stage_build() {
  local t0=$(date +%s)
  if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda \
       > "$out/build.log" 2>&1 && cmake --build "$build" -j 16 ${BUILD_TARGETS:+--target $BUILD_TARGETS} \
       >> "$out/build.log" 2>&1; then
    note "build: ok ($(( $(date +%s) - t0 )) s)"
  else
    note "build: FAILED"; tail -40 "$out/build.log"; return 1
  fi
}

stage_test() {
  ctest --test-dir "$build" -j 4 --output-on-failure --timeout 600 -E 'GpuAutotune' > "$out/ctest.log" 2>&1
  note "ctest: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  grep -E "^\s+[0-9]+ - .*(Failed|SEGFAULT|Timeout|Exception)" "$out/ctest.log" | head -20 || true
}

stage_runs() {
  : > "$out/runs.log"
  for spec in examples/*.yaml; do
    local name=$(basename "$spec" .yaml) iters=20 log
    case "$name" in seed*) iters=50;; esac
    log=$(mktemp)
    if timeout 300 "$build/fusejit" run "$spec" --iters $iters > "$log" 2>&1; then r=PASS; else r="FAIL(rc=$?)"; fi
    { echo "== fusejit run $spec"; cat "$log"; } >> "$out/runs.log"
    note "run $name: $r $(grep -o 'median [0-9.]* ms' "$log" | head -1) $(grep -o 'rel_l2 [0-9.e+-]*' "$log" | head -1)"
    rm -f "$log"
  done
  grep -A8 "== fusejit run examples/seed" "$out/runs.log" || true
}

stage_memcheck() {
  : > "$out/memcheck.log"
  for spec in tests/specs/seed*_small.yaml; do
    local log=$(mktemp) rc
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/fusejit" run "$spec" --no-time \
      > "$log" 2>&1
    rc=$?
    { echo "== memcheck $spec (rc=$rc)"; cat "$log"; } >> "$out/memcheck.log"
    note "memcheck $(basename "$spec" .yaml): rc=$rc $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$log" | tail -1)"
    rm -f "$log"
  done
}

# The spec to sanitize for an example: its reduced-size copy when there is one.
small_spec() {
  local name=$(basename "$1" .yaml)
  case "$name" in seed[0-9]_*) name=${name%%_*};; esac
  if [ -f "tests/specs/${name}_small.yaml" ]; then echo "tests/specs/${name}_small.yaml"; else echo "$1"; fi
}

stage_sanitize() {
  local cs=compute-sanitizer
  command -v $cs >/dev/null || cs=/usr/local/cuda/bin/compute-sanitizer
  export FUSEJIT_CACHE_DIR=${FUSEJIT_CACHE_DIR:-/tmp/fj-cache}  # compile each spec once for all tools
  : > "$out/sanitize.log"
  local failed=0
  local configs
  IFS=';' read -r -a configs <<< "${SANITIZE_CONFIGS:-}"
  [ ${#configs[@]} -gt 0 ] || configs=("")
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck}; do
    for example in ${SANITIZE_SPECS:-examples/*.yaml}; do
      for cfg in "${configs[@]}"; do
        local spec log rc
        spec=$(small_spec "$example")
        log=$(mktemp)
        timeout 300 $cs --tool "$tool" --error-exitcode 9 "$build/fusejit" run "$spec" --no-time ${cfg:+--config $cfg} > "$log" 2>&1
        rc=$?
        { echo "== $tool $spec '$cfg' (rc=$rc)"; cat "$log"; } >> "$out/sanitize.log"
        [ $rc -eq 0 ] || failed=$((failed + 1))
        note "$tool $(basename "$spec" .yaml)${cfg:+ '$cfg'}: rc=$rc $(grep -oE '(ERROR|RACECHECK) SUMMARY: [0-9]* (errors|hazards[^)]*)' "$log" | tail -1)"
        rm -f "$log"
      done
    done
  done
  note "sanitize: $failed failing run(s)"
  [ $failed -eq 0 ]
}

stage_tune() {
  export FUSEJIT_CACHE_DIR=${FUSEJIT_CACHE_DIR:-/tmp/fj-cache}
  : > "$out/tune.log"
  for spec in examples/seed*.yaml; do
    timeout 240 "$build/fusejit" tune "$spec" --budget 90 --quiet >> "$out/tune.log" 2>&1
    note "tune $(basename "$spec" .yaml): rc=$? $(grep '^winner' "$out/tune.log" | tail -1)"
  done
  timeout 400 "$build/tests/fusejit_tests" --gtest_filter='Seeds/GpuAutotune*' >> "$out/tune.log" 2>&1
  note "GpuAutotune test: $(grep -E '^\[  (PASSED|FAILED)' "$out/tune.log" | tr '\n' ' ')"
}

stage_python() {
  ( "$build/capi/c_api_test" && PYTHONPATH=python FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so" \
      python3 -m pytest -q python/tests ) > "$out/python.log" 2>&1
  note "c api + python: rc=$? $(tail -1 "$out/python.log")"
}

# A linear chain spec: gemm_spec PRECISION M K N [bias_relu|none] -> path
gemm_spec() {
  local p=$1 m=$2 k=$3 n=$4 chain=${5:-bias_relu} f="/tmp/gemm_$1_$2x$3x$4_${5:-bias_relu}.yaml"
  {
    printf 'name: gemm_%s_%sx%sx%s\nprecision: %s\ninputs:\n' "$p" "$m" "$k" "$n" "$p"
    printf '  - {name: x, shape: [%s, %s]}\n  - {name: w, shape: [%s, %s]}\n' "$m" "$k" "$n" "$k"
    if [ "$chain" = none ]; then
      printf 'ops:\n  - {name: y, op: linear, args: [x, w]}\noutputs: [y]\n'
    else
      printf '  - {name: b, shape: [%s]}\nops:\n  - {name: y0, op: linear, args: [x, w]}\n' "$n"
      printf '  - {name: y1, op: add, args: [y0, b]}\n  - {name: y, op: relu, args: [y1]}\noutputs: [y]\n'
    fi
  } > "$f"
  echo "$f"
}

stage_gemm() {
  timeout 500 "$build/tests/fusejit_tests" --gtest_filter='GpuGemm*:CodegenWgmma*:CodegenGemmMma*' > "$out/gemm_tests.log" 2>&1
  note "gemm tests: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/gemm_tests.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED|rel_l2" "$out/gemm_tests.log" | head -30
  : > "$out/gemm_runs.log"
  for p in ${GEMM_MODES:-bf16 f16 tf32 fp32}; do
    for shape in ${GEMM_SHAPES:-4096x4096x4096 1024x8192x8192 8192x8192x8192 100x1000x500}; do
      set -- ${shape//x/ }
      local spec log
      spec=$(gemm_spec "$p" "$1" "$2" "$3")
      log=$(timeout 120 "$build/fusejit" run "$spec" --iters 20 2>&1)
      echo "== $spec"$'\n'"$log" >> "$out/gemm_runs.log"
      local ms=$(echo "$log" | grep -o 'median [0-9.]* ms' | head -1 | grep -o '[0-9.]*')
      local tf=$(python3 -c "print(f'{2*$1*$2*$3/($ms*1e-3)/1e12:.0f}')" 2>/dev/null)
      note "run $p ${1}x${2}x${3}: $(echo "$log" | grep -oE 'PASS|FAIL' | head -1) ${ms:-?} ms ${tf:-?} TFLOP/s $(echo "$log" | grep -o 'rel_l2 [0-9.e+-]*' | head -1) $(echo "$log" | grep -o 'fj_linear[a-z0-9_]*' | head -1)"
    done
  done
}

# The seeds' dW at full size (what their training steps run): conv2d_weight_grad of x and dZ, each mode.
wgrad_spec() {  # precision name x-shape dz-shape
  local f="/tmp/wgrad_$1_$2.yaml"
  printf 'name: wgrad_%s_%s\nprecision: %s\ninputs:\n  - {name: x, shape: %s, init: uniform01}\n' "$2" "$1" "$1" "$3" > "$f"
  printf '  - {name: dz, shape: %s, init: normal}\nops:\n' "$4" >> "$f"
  printf '  - {name: dw, op: conv2d_weight_grad, args: [x, dz], kernel_size: 3}\noutputs: [dw]\n' >> "$f"
  echo "$f"
}

stage_wgrad() {
  : > "$out/wgrad_runs.log"
  for p in ${WGRAD_MODES:-fp32 tf32 bf16}; do
    for seed in seed1 seed3; do
      local spec
      if [ $seed = seed1 ]; then spec=$(wgrad_spec "$p" $seed "[128, 64, 128, 128]" "[128, 128, 126, 126]")
      else spec=$(wgrad_spec "$p" $seed "[128, 8, 256, 256]" "[128, 64, 254, 254]"); fi
      run_noted "wgrad $p $seed" wgrad_runs.log "$spec" --samples 2000 --iters 10 ${WGRAD_CONFIG:+--config "$WGRAD_CONFIG"}
    done
  done
}

# `fusejit run SPEC ARGS...`, its output appended to $out/LOG, a summary line "LABEL: PASS|FAIL ms rel_l2":
# run_noted LABEL LOG SPEC ARGS...
run_noted() {
  local label=$1 logfile=$2 spec=$3 log ms
  shift 3
  log=$(timeout 120 "$build/fusejit" run "$spec" "$@" 2>&1)
  echo "== $spec $*"$'\n'"$log" >> "$out/$logfile"
  ms=$(echo "$log" | grep -o 'median [0-9.]* ms' | head -1 | grep -o '[0-9.]*')
  note "$label: $(echo "$log" | grep -oE 'PASS|FAIL' | head -1) ${ms:-?} ms $(echo "$log" | grep -o 'rel_l2 [0-9.e+-]*' | head -1)"
}

# `fusejit run` of each spec under each config, in turn: run_configs LABEL LOG ITERS "SPECS" CONFIG...
run_configs() {
  local label=$1 logfile=$2 iters=$3 specs=$4 spec config
  shift 4
  : > "$out/$logfile"
  for spec in $specs; do
    for config in "$@"; do
      run_noted "$label $(basename "$spec" .yaml) '${config}'" "$logfile" "$spec" --backend cuda --samples "${ABRUN_SAMPLES:-20000}" \
        --iters "$iters" --config "$config"
    done
  done
}

stage_swapab() {
  # fp32-operand matmuls with B [K, N]: swap-AB (the default) against the transposed copy, in one process each pair
  run_configs swapab swapab_runs.log "${SWAPAB_ITERS:-20}" \
    "tests/specs/seed2_dx_tf32.yaml tests/specs/seed2_dw_tf32.yaml $(echo bench/specs_matmul_tf32/*.yaml)" "" "wgmma_swap_ab=0"
}

stage_gemmbench() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  PYTHONUNBUFFERED=1 timeout 560 python3 bench/bench_gemm.py --out "$out" $commit_arg ${GEMM_BENCH_ARGS:-} 2>&1 | tee "$out/bench_gemm.log" | tail -60
  note "gemm bench: rc=${PIPESTATUS[0]}"
}

stage_convbench() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  PYTHONUNBUFFERED=1 timeout 560 python3 bench/bench_conv.py --out "$out" $commit_arg ${CONV_BENCH_ARGS:-} 2>&1 | tee "$out/bench_conv.log" | tail -60
  note "conv bench: rc=${PIPESTATUS[0]}"
}

stage_normbench() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  PYTHONUNBUFFERED=1 timeout 560 python3 bench/bench_norm.py --out "$out" $commit_arg --fusejit-bin "$PWD/$build/fusejit" ${NORM_BENCH_ARGS:-} 2>&1 | tee "$out/bench_norm.log" | tail -60
  note "norm bench: rc=${PIPESTATUS[0]}"
}

stage_gtest() {
  # Through ctest, so the selected tests run as parallel processes (NVRTC compiles dominate).
  ctest --test-dir "$build" -j ${GTEST_JOBS:-12} --timeout ${GTEST_TIMEOUT:-500} --output-on-failure \
    -R "${TEST_REGEX:-^Gpu|/Gpu}" -E "${TEST_EXCLUDE:-GpuAutotune}" > "$out/gtest.log" 2>&1
  note "gtest ${TEST_REGEX:-^Gpu|/Gpu}: $(grep -E 'tests passed|tests failed' "$out/gtest.log" | tail -1)"
  grep -E "^\s+[0-9]+ - .*(Failed|SEGFAULT|Timeout|Exception)" "$out/gtest.log" | head -30 || true
}

stage_backbench() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  PYTHONUNBUFFERED=1 PYTHONPATH=python timeout 560 python3 bench/bench_backward_seeds.py --out "$out" \
    ${BACKWARD_BENCH_ARGS:-} 2>&1 | tee "$out/bench_backward.log" | tail -40
  note "backward bench: rc=${PIPESTATUS[0]}"
}

stage_stamps() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  PYTHONPATH=python timeout 300 python3 bench/profile_stamps.py ${STAMPS_ARGS:---seed 2 --mode bf16} 2>&1 \
    | grep -v Warning | tee "$out/stamps.log" | tail -60
  note "stamps: rc=${PIPESTATUS[0]}"
}

stage_abrun() {
  local configs
  IFS=';' read -ra configs <<< "${ABRUN_CONFIGS-;epilogue_transpose=0}"
  [ ${#configs[@]} -gt 0 ] || configs=("")
  run_configs abrun abrun.log "${ABRUN_ITERS:-20}" "${ABRUN_SPECS:-$(echo bench/specs_transpose/*.yaml)}" "${configs[@]}"
}

stage_ncu() {
  # ncu's headline sections for the kernels of `fusejit run` on NCU_SPECS under each of NCU_CONFIGS (';'-separated):
  # those matching NCU_KERNEL (a regex, default every fusejit kernel), NCU_SKIP launches skipped, NCU_COUNT profiled
  local configs spec c shape m k n dt one="$out/ncu_one.log"
  local ncu_lines='^  [a-z_0-9]+ \(|Duration|Compute \(SM\) Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Executed Ipc Active|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Grid Size|Block Size'
  IFS=';' read -ra configs <<< "${NCU_CONFIGS-}"
  [ ${#configs[@]} -gt 0 ] || configs=("")
  : > "$out/ncu.log"
  for spec in ${NCU_SPECS:-bench/specs_gemm_s44/gemm_512x4096x11008_bias_relu_bf16.yaml}; do
    for c in "${configs[@]}"; do
      echo "== ncu $spec '$c'" | tee -a "$out/ncu.log"
      timeout 300 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section LaunchStats --section Occupancy -k "regex:${NCU_KERNEL:-fj_}" --launch-skip "${NCU_SKIP:-1}" \
        --launch-count "${NCU_COUNT:-2}" "$build/fusejit" run "$spec" --iters 2 --warmup 1 --samples 1000 \
        --config "$c" > "$one" 2>&1
      cat "$one" >> "$out/ncu.log"
      grep -E "$ncu_lines" "$one"
    done
  done
  for shape in ${NCU_TORCH-}; do  # cuBLAS's kernel of F.linear at MxKxN:dtype, e.g. 512x4096x11008:bf16
    echo "== ncu torch F.linear $shape" | tee -a "$out/ncu.log"
    IFS='x:' read -r m k n dt <<< "$shape"
    timeout 300 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section LaunchStats --section Occupancy -k "regex:${NCU_TORCH_KERNEL:-nvjet|gemm|cutlass}" --launch-skip 2 \
      --launch-count 1 python3 -c "import torch, torch.nn.functional as F
x = torch.rand($m, $k, device='cuda', dtype=torch.$dt); w = torch.rand($n, $k, device='cuda', dtype=torch.$dt)
for _ in range(4): F.linear(x, w)
torch.cuda.synchronize()" > "$one" 2>&1
    cat "$one" >> "$out/ncu.log"
    grep -E "$ncu_lines" "$one"
  done
  rm -f "$one"
  note "ncu: $(grep -c '^== ncu' "$out/ncu.log") run(s), the sections in ncu.log"
}

stage_ncusass() {
  # ncu's PC sampling per SASS instruction (bench/ncu_sass_stalls.py: the top stalls, mainloop vs epilogue) of the
  # first kernel matching NCU_KERNEL in `fusejit run` on NCU_SPECS under each of NCU_CONFIGS (';'-separated)
  local configs spec c i=0 rep
  IFS=';' read -ra configs <<< "${NCU_CONFIGS-}"
  [ ${#configs[@]} -gt 0 ] || configs=("")
  : > "$out/ncusass.log"
  for spec in ${NCU_SPECS:-bench/specs_gemm_s44/gemm_512x4096x11008_bias_relu_bf16.yaml}; do
    for c in "${configs[@]}"; do
      i=$((i + 1)); rep="$out/ncusass_$i"
      echo "== ncusass $i: $spec '$c'" | tee -a "$out/ncusass.log"
      timeout 300 ncu --section SourceCounters --section WarpStateStats --section SpeedOfLight \
        -k "regex:${NCU_KERNEL:-fj_}" --launch-skip "${NCU_SKIP:-1}" --launch-count 1 -o "$rep" -f \
        "$build/fusejit" run "$spec" --iters 2 --warmup 1 --samples 1000 --config "$c" >> "$out/ncusass.log" 2>&1
      ncu --import "$rep.ncu-rep" --page details 2>&1 | grep -E 'Duration|Throughput' | tee -a "$out/ncusass.log"
      ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.csv" 2>> "$out/ncusass.log" &&
        python3 bench/ncu_sass_stalls.py "$rep.csv" ${NCUSASS_SPLIT:+--split-at "$NCUSASS_SPLIT"} \
          > "$out/ncusass_$i.txt" 2>&1
      head -3 "$out/ncusass_$i.txt"
      rm -f "$rep.ncu-rep" "$rep.csv"  # large; the summary stays
    done
  done
  note "ncusass: $i run(s), summaries in ncusass_N.txt"
}

stage_profile() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  local runs args
  IFS=';' read -ra runs <<< "${PROFILE_RUNS:---seed 2 --mode bf16 --gaps --flush}"
  : > "$out/profile.log"
  for args in "${runs[@]}"; do
    echo "== profile_backward.py $args" | tee -a "$out/profile.log"
    # shellcheck disable=SC2086
    PYTHONPATH=python timeout 300 python3 bench/profile_backward.py $args 2>&1 | grep -v Warning | tee -a "$out/profile.log" | tail -45
  done
  note "profile: ${#runs[@]} run(s)"
}

stage_bench() {
  export FUSEJIT_LIB="$PWD/$build/capi/libfusejit_c.so"
  PYTHONUNBUFFERED=1 timeout 560 python3 bench/bench.py --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | tail -40
  note "bench: rc=${PIPESTATUS[0]}"
}

for s in "${stages[@]}"; do
  "stage_$s" || { echo "stage $s failed"; break; }
done
echo; echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
