#!/usr/bin/env bash
# GPU machine, one device call (~4-5 min): check, then time, the queued conv experiments against the defaults.
# (Session 39's set ran in session 40: bench/results/ab_conv_paths_H200_20261128.log; session 40's set —
# NCHW / streamed / ping-pong halos, seed 3's register cap — in session 41: ab_conv_halo_nchw_H200_20261128.log.)
# Now:
#   1. build the tests, the CLI and the C library;
#   2. the NCHW halo paths' GPU tests under a short timeout (session 41 fixed their 16-bit units: kPer was 2
#      channels, not 8) with the rest of the wgmma halo tests;
#   3. `fusejit run` medians (gpu_check.sh abrun): the 16-bit NCHW halos (seed 1, 32x64x224^2, 128x256x56^2)
#      against the defaults; 128x256x56^2 tf32 (the row behind torch.compile) under other wgmma tiles;
#   4. DRAM bytes written by the pooled / reduced chains (bench/conv_dram_writes.py, ncu).
# Logs go to $OUT (or ./gpu-out). AB_ITERS (default 20) trials a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export OUT=$out
BUILD_TARGETS="fusejit_tests fusejit fusejit_c" scripts/gpu_check.sh build | tail -2 || exit 1
timeout 300 build/tests/fusejit_tests --gtest_filter='GpuConvMma.WgmmaHalo*' > "$out/new_paths_tests.log" 2>&1
echo "wgmma halo GPU tests: rc=$? ($(grep -cE '^\[       OK \]' "$out/new_paths_tests.log") passed)"
grep -E '^\[  FAILED  \]|Failure' "$out/new_paths_tests.log" | head -20
d=bench/specs_conv_halo
ABRUN_ITERS=${AB_ITERS:-20} \
  ABRUN_SPECS="$d/conv_seed1_bf16.yaml $d/conv_c64_224_bf16.yaml" \
  ABRUN_CONFIGS=";conv_halo=1,conv_nchw=1;conv_halo=1,conv_nchw=1,wgmma_schedule=pingpong" \
  timeout 100 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_halo_nchw_16bit.log" 2>/dev/null
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_r56_bf16.yaml" ABRUN_CONFIGS=";conv_halo=2,conv_nchw=1" \
  timeout 60 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_halo_streamed_16bit.log" 2>/dev/null
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_r56_tf32.yaml" \
  ABRUN_CONFIGS=";wgmma_tile=128x256x3x16;wgmma_tile=128x128x5x16;wgmma_tile=128x128x5x16,wgmma_schedule=pingpong;wgmma_tile=64x128x6x16,wgmma_schedule=pingpong;wgmma_tile=64x256x4x16,wgmma_schedule=pingpong;tma_store=1" \
  timeout 150 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_r56_tf32_tiles.log" 2>/dev/null
timeout 200 python3 bench/conv_dram_writes.py --commit "${COMMIT:-unknown}" --out "$out" 2>&1 | tail -24
for f in "$out/ab_halo_nchw_16bit.log" "$out/ab_halo_streamed_16bit.log" "$out/ab_r56_tf32_tiles.log"; do
  [ -f "$f" ] && grep -hE '^==|median|FAIL|error' "$f" | sed 's/ --backend cuda --samples 20000 --iters [0-9]*//'
done
