#!/usr/bin/env bash
# GPU machine, two device calls (`a` ~6 min, then `b` ~5 min; each under the 600 s a call may take): the queued
# conv experiments against the defaults.
# (Session 39's set ran in session 40: bench/results/ab_conv_paths_H200_20261128.log; session 40's set —
# NCHW / streamed / ping-pong halos, seed 3's register cap — in session 41: ab_conv_halo_nchw_H200_20261128.log;
# clusters: ab_conv_cluster_H200_20261128.log.) Now:
#   1. build the tests and the CLI;
#   2. the wgmma dW (conv2d_weight_grad with mainloop=wgmma, new, opt-in; never run on a GPU): its GPU tests under
#      a short timeout, then a dW of seed 1's size with padding 1 (OW 128) and 128x256x56^2's dW (OW 56: ragged
#      k-tiles; bench/specs_wgrad) against the default mma.sync dW (seed 1's own, OW 126, is not eligible: grad's
#      252-byte rows; issue 11);
#   3. the channel min in fp32 (3xTF32 128x32 halo tiles: 255 registers, 184 bytes of spills, 2.25x its output in
#      DRAM writes): tiles that spill less (ptxas: 128x32 warps 16 wide 24 bytes, 64x32 warps 16 wide 20), timed
#      (`fusejit run`) and their DRAM bytes written (bench/conv_dram_writes.py --config);
#   4. the halo prefetch (the next patch's halo in registers during the MMAs) at today's 128x64 tiles of 4 blocks an
#      SM: seed 3 (bf16: 127 registers, no spills; tf32: 60 bytes of spills at 128, so also 3 blocks) and the global
#      pool row (bf16 86, tf32 112 registers) — each block waits for its halo's loads every tile today;
#   5. seed 1's training forward (y and the saved Z: two NCHW outputs) with both on the runs epilogue
#      (conv_runs=2: ping-pong 128-row tiles) against the default (one runs output: cooperative staged stores);
#   6. 128x256x56^2 (tf32, bf16: the row level with torch.compile) under raster groups 8 and 32 (default 16), then
#      where its conv kernel waits (scripts/ncu_stalls.sh, bf16 and tf32 defaults).
# Part a: 1-5; part b: the channel min's DRAM writes (3) and 6. Part c (session 42): the wgmma dW by default, grad
# from zero-padded rows where OW is not 16 bytes (seed 1's own dW): the dW GPU tests, the backward GPU tests and
# examples, seed 1's dW (bf16) against mma.sync, then seed 1's training step against torch.compile. Part d (queued
# in session 42, never run): the tf32 swap-AB dW (wgmma_swap_ab=1: x read in place into registers): its GPU tests,
# then seed 1's tf32 dW and 128x64x128^2 p1's against the default mma.sync dW (flip the default if it wins, then
# bench_backward_seeds.py --seeds 1 --modes tf32), and seed 1's kernel tables (tf32, bf16; BUILD_EXTRA=" fusejit_c").
# (Ran in session 43: bench/results/ab_conv_paths_d_H200_20261129.log.) Part e: the swap-AB dW on 192-column tiles
# (one kernel row's taps over one box of x): its GPU tests, seed 1's tf32 dW against mma.sync and the 128x64 tile,
# and ncu's throughput figures of its kernel. Part f: that dW by default (tf32, one box of x): the dW, backward and
# example GPU tests, then seed 1's tf32 training step against torch.compile (BUILD_EXTRA=" fusejit_c"). Part g: grad
# copied by the swap-AB dW's producer threads (cp.async; no padded copy where OW is even): the same tests, seed 1's
# tf32 dW against mma.sync, the training step. (Ran: correct, but slower: the dW 1.98 ms against 1.63 with the
# padded copy, the step 8.32 against 8.07 ms; reverted, so part g no longer applies: ab_conv_paths_g_H200_20261129.log.)
# Part h (queued in session 43, never run): the swap-AB dW's 192-column tiles for padded convs (44-pixel rows of x,
# opt-in): the dW GPU tests (SwapAb* now run them on the padded geometries), then 128x64x128^2 p1 tf32 on mma.sync
# (the default) against wgmma_swap_ab=1 and the tuning space's swap-AB tiles; flip the default where it wins
# (pass_mainloop.cpp wgrad_wgmma_blocker: box bytes 176 too); and seed 1's tf32 dW over flattened grad planes
# (wgrad_flat=1: no padded copy; GpuConvWgrad.SwapAbTf32FlatPlanes* first): if it wins, make it the default where
# grad's rows need the copy (pass_schedule.cpp choose_wgrad_swap_tile), then part f's training step. Part i: the training steps at the tree's defaults
# that issue 11 has least margin on, seed 1 bf16 and seed 2 bf16 (BUILD_EXTRA=" fusejit_c"; one call each).
# (Part h ran in session 44: ab_conv_paths_h_H200_20261129.log; both won and are the defaults since.) Part j: the
# dW, backward and example GPU tests at those defaults, then seed 1's tf32 training step (BUILD_EXTRA=" fusejit_c").
# Logs go to $OUT (or ./gpu-out). AB_ITERS (default 20) trials a run.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?usage: scripts/ab_conv_paths.sh a|b|c|d}
case $part in a|b|c|d|e|f|g|h|i|j) ;; *) echo "unknown part '$part' (a to j)" >&2; exit 2 ;; esac
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export OUT=$out ABRUN_ITERS=${AB_ITERS:-20}
BUILD_TARGETS="fusejit_tests fusejit${BUILD_EXTRA:-}" scripts/gpu_check.sh build | tail -2 || exit 1
r=bench/specs_conv_rows
d=bench/specs_conv_halo
abrun() {  # log name, timeout, then the environment's ABRUN_* settings
  timeout "$2" scripts/gpu_check.sh abrun > /dev/null 2>&1
  mv "$out/abrun.log" "$out/$1.log" 2>/dev/null
}
gtests() {  # test regex, timeout: the GPU tests' summary and the first failures
  TEST_REGEX="$1" GTEST_JOBS=14 timeout "$2" scripts/gpu_check.sh gtest | tail -6
  grep -E '^\[  FAILED  \]|Failure' -A6 "$out/gtest.log" 2>/dev/null | head -30
}
training() {  # bench_backward_seeds.py's arguments: its table rows
  BACKWARD_BENCH_ARGS="$1" timeout 240 scripts/gpu_check.sh backbench | grep -E '^\|' | tail -4
}
case $part in
a)
  timeout 200 build/tests/fusejit_tests --gtest_filter='GpuConvWgrad.Wgmma*' > "$out/wgrad_wgmma_tests.log" 2>&1
  echo "wgmma dW GPU tests: rc=$? ($(grep -cE '^\[       OK \]' "$out/wgrad_wgmma_tests.log") passed)"
  grep -E '^\[  FAILED  \]|Failure' -A4 "$out/wgrad_wgmma_tests.log" | head -30
  ABRUN_SAMPLES=500 ABRUN_SPECS="bench/specs_wgrad/wgrad_c64_128_p1_bf16.yaml bench/specs_wgrad/wgrad_r56_bf16.yaml" \
    ABRUN_CONFIGS=";mainloop=wgmma;mainloop=wgmma,split_k=22;mainloop=wgmma,wgmma_tile=128x128x5,split_k=14" \
    abrun ab_wgrad_wgmma 150
  ABRUN_SPECS="$r/conv_cmin_fp32.yaml" ABRUN_CONFIGS=";mma_tile=128x32x3x16;mma_tile=64x32x2x16;mma_tile=64x32x3x32" \
    abrun ab_cmin_fp32_tiles 90
  ABRUN_SPECS="$d/conv_seed3_bf16.yaml $d/conv_seed3_tf32.yaml $r/conv_gap_bf16.yaml $r/conv_gap_tf32.yaml" \
    ABRUN_CONFIGS=";halo_prefetch=1;halo_prefetch=1,mma_min_blocks=3" abrun ab_halo_prefetch 120
  ABRUN_SPECS="$r/seed1_train_fwd_bf16.yaml $r/seed1_train_fwd_tf32.yaml" ABRUN_CONFIGS=";conv_runs=2" \
    abrun ab_train_fwd_runs 60
  logs="ab_wgrad_wgmma ab_cmin_fp32_tiles ab_halo_prefetch ab_train_fwd_runs" ;;
b)
  timeout 150 python3 bench/conv_dram_writes.py --problems 6 --modes fp32 --commit "${COMMIT:-unknown}" --out "$out" \
    --config "" mma_tile=128x32x3x16 mma_tile=64x32x2x16 2>&1 | tail -8
  ABRUN_SPECS="$d/conv_r56_tf32.yaml $d/conv_r56_bf16.yaml" \
    ABRUN_CONFIGS=";wgmma_tile=64x256x5x8,wgmma_schedule=pingpong;wgmma_tile=64x256x5x32,wgmma_schedule=pingpong" \
    abrun ab_r56_raster 90
  for m in bf16 tf32; do
    OUT=$out timeout 200 scripts/ncu_stalls.sh $d/conv_r56_$m.yaml "" > "$out/ncu_r56_$m.log" 2>&1
    mv "$out/ncu_stalls_1_sass.csv" "$out/ncu_r56_${m}_sass.csv" 2>/dev/null
  done
  head -40 "$out/ncu_r56_bf16.log"
  logs="ab_r56_raster" ;;
c)
  TEST_REGEX='GpuConvWgrad|GpuBackward|GpuExamples' GTEST_JOBS=14 timeout 260 scripts/gpu_check.sh gtest | tail -12
  w=bench/specs_wgrad
  ABRUN_SAMPLES=500 ABRUN_SPECS="$w/wgrad_seed1_bf16.yaml $w/wgrad_c64_128_p1_bf16.yaml" ABRUN_CONFIGS=";mainloop=mma" \
    abrun ab_wgrad_seed1 120
  BACKWARD_BENCH_ARGS="--seeds 1 --modes bf16 --rounds 2 --tag wgmma_dw" timeout 200 scripts/gpu_check.sh backbench \
    | grep -E '^\|' | tail -4
  logs="ab_wgrad_seed1" ;;
d)
  # the swap-AB dW's tests, and the GEMM tests (swap_ab_k_tiles, which the matmul swap-AB shares, changed with it)
  TEST_REGEX='GpuConvWgrad|GpuGemm' GTEST_JOBS=14 timeout 260 scripts/gpu_check.sh gtest | tail -12
  w=bench/specs_wgrad
  sed 's/bf16/tf32/g; s/dtype: tf32/dtype: f32/g' $w/wgrad_c64_128_p1_bf16.yaml > /tmp/wgrad_c64_128_p1_tf32.yaml
  ABRUN_SAMPLES=500 ABRUN_SPECS="$w/wgrad_seed1_tf32.yaml /tmp/wgrad_c64_128_p1_tf32.yaml" \
    ABRUN_CONFIGS=";wgmma_swap_ab=1;wgmma_swap_ab=1,wgmma_tile=128x64x8,split_k=14" abrun ab_wgrad_swap 200
  # where seed 1's tf32 and bf16 steps spend their time now (torch.profiler's kernel table, fusejit side)
  PROFILE_RUNS="--seed 1 --mode tf32 --gaps --flush;--seed 1 --mode bf16 --gaps --flush" timeout 200 \
    scripts/gpu_check.sh profile > /dev/null 2>&1
  grep -hE '^== |^ +[0-9.]+ +[0-9.]+ +' "$out"/profile*.log 2>/dev/null | head -60
  logs="ab_wgrad_swap" ;;
e)
  TEST_REGEX='GpuConvWgrad' GTEST_JOBS=14 timeout 200 scripts/gpu_check.sh gtest | tail -6
  w=bench/specs_wgrad
  ABRUN_SAMPLES=500 ABRUN_SPECS="$w/wgrad_seed1_tf32.yaml" ABRUN_CONFIGS=";wgmma_swap_ab=1;wgmma_swap_ab=1,split_k=22;\
wgmma_swap_ab=1,wgmma_tile=128x192x6;wgmma_swap_ab=1,wgmma_tile=128x64x8,split_k=14" abrun ab_wgrad_swap192 150
  KERNEL_REGEX=fj_conv2d_weight_grad timeout 150 scripts/ncu_stalls.sh $w/wgrad_seed1_tf32.yaml wgmma_swap_ab=1 \
    > "$out/ncu_wgrad_swap192.log" 2>&1
  grep -E "Throughput|Duration|Eligible|long_scoreboard|gmma|wait_per" "$out/ncu_wgrad_swap192.log"
  logs="ab_wgrad_swap192" ;;
f)
  gtests 'GpuConvWgrad|GpuBackward|GpuExamples' 240
  training "--seeds 1 --modes tf32 --rounds 2 --tag swap_dw"
  logs="" ;;
g)
  echo "part g was reverted (see above)" >&2; exit 2 ;;
h)
  gtests GpuConvWgrad 200
  ABRUN_SAMPLES=500 ABRUN_SPECS="bench/specs_wgrad/wgrad_c64_128_p1_tf32.yaml" ABRUN_CONFIGS=";wgmma_swap_ab=1;\
wgmma_swap_ab=1,wgmma_tile=128x192x6,split_k=22;wgmma_swap_ab=1,wgmma_tile=128x64x8,split_k=14" abrun ab_wgrad_swap_p1 120
  # grad's planes flattened (no padded copy) on seed 1's tf32 dW: the default (1.63 ms in session 43) against it
  ABRUN_SAMPLES=500 ABRUN_SPECS="bench/specs_wgrad/wgrad_seed1_tf32.yaml" ABRUN_CONFIGS=";wgrad_flat=1" \
    abrun ab_wgrad_flat 60
  logs="ab_wgrad_swap_p1 ab_wgrad_flat" ;;
j)
  gtests 'GpuConvWgrad|GpuBackward|GpuExamples' 240
  training "--seeds 1 --modes tf32 --rounds 2 --tag flat_dw"
  logs="" ;;
i)
  training "--seeds 1 --modes bf16 --rounds 2 --tag margin"
  training "--seeds 2 --modes bf16 --rounds 2 --tag margin"
  logs="" ;;
esac
for f in $logs; do
  [ -f "$out/$f.log" ] && grep -hE '^==|median|FAIL|error' "$out/$f.log" | sed 's/ --backend cuda --samples [0-9]* --iters [0-9]*//'
done
