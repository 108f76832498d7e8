#!/usr/bin/env bash
# GPU machine, one device call (~5-7 min): check, then time, the queued conv experiments against the defaults.
# (Session 39's set — conv_nchw, staging_prefetch, halo_prefetch, warp tiles — ran in session 40:
# bench/results/ab_conv_paths_H200_20261128.log.) Now:
#   1. build the tests and the CLI;
#   2. the new paths' GPU tests alone, under a short timeout (a barrier bug would hang, not fail):
#      GpuConvMma.WgmmaHaloNchw* (conv_halo=1,conv_nchw=1: each patch's halo written from NCHW x) and
#      GpuConvMma.WgmmaHaloStreamedFilter* (conv_halo=2: the filter streamed, a halo per channel block);
#   3. `fusejit run` medians (gpu_check.sh abrun): seed 1 and 32x64x224^2 (bf16, tf32) under the default, the
#      TMA halo boxes (conv_halo=1) and the NCHW halos with one and two buffers and on ping-pong tiles;
#      128x256x56^2 (tf32, bf16) with the
#      filter streamed (conv_halo=2, TMA or NCHW halos); seed 3 (bf16, tf32) under the
#      new default register cap (mma_min_blocks=4 for 128-thread halo tiles) against 2 and 3.
# Logs go to $OUT (or ./gpu-out). AB_ITERS (default 20) trials a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export OUT=$out
BUILD_TARGETS="fusejit_tests fusejit" scripts/gpu_check.sh build | tail -2 || exit 1
timeout 300 build/tests/fusejit_tests --gtest_filter='GpuConvMma.WgmmaHaloNchw*:GpuConvMma.WgmmaHaloStreamed*:GpuConvMma.WgmmaHaloPingPong*' \
  > "$out/new_paths_tests.log" 2>&1
echo "new-path GPU tests: rc=$? ($(grep -cE '^\[       OK \]' "$out/new_paths_tests.log") passed)"
grep -E '^\[  FAILED  \]|Failure' "$out/new_paths_tests.log" | head -20
d=bench/specs_conv_halo
ABRUN_ITERS=${AB_ITERS:-20} \
  ABRUN_SPECS="$d/conv_seed1_bf16.yaml $d/conv_seed1_tf32.yaml $d/conv_c64_224_bf16.yaml $d/conv_c64_224_tf32.yaml" \
  ABRUN_CONFIGS=";conv_halo=1;conv_halo=1,conv_nchw=1;conv_halo=1,conv_nchw=1,wgmma_tile=128x64x2;conv_halo=1,conv_nchw=1,wgmma_schedule=pingpong;conv_halo=1,conv_nchw=1,wgmma_schedule=pingpong,wgmma_tile=64x64x2" \
  timeout 240 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_wgmma_halo_nchw.log" 2>/dev/null
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_r56_tf32.yaml $d/conv_r56_bf16.yaml" \
  ABRUN_CONFIGS=";conv_halo=2;conv_halo=2,conv_nchw=1;conv_halo=2,conv_nchw=1,wgmma_tile=128x128x4;conv_halo=2,conv_nchw=1,wgmma_schedule=pingpong" \
  timeout 150 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_wgmma_halo_streamed.log" 2>/dev/null
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_seed3_bf16.yaml $d/conv_seed3_tf32.yaml" \
  ABRUN_CONFIGS=";mma_min_blocks=2;mma_min_blocks=3" timeout 120 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_seed3_caps.log" 2>/dev/null
for f in "$out/ab_wgmma_halo_nchw.log" "$out/ab_wgmma_halo_streamed.log" "$out/ab_seed3_caps.log"; do
  [ -f "$f" ] && grep -hE '^==|median|FAIL|error' "$f" | sed 's/ --backend cuda --samples 20000 --iters [0-9]*//'
done
