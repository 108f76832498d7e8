#!/usr/bin/env bash
# GPU machine, one device call (~6-8 min): check, then time, the opt-in conv paths against the defaults
# (docs/codegen.md: conv_nchw, staging_prefetch, halo_prefetch, mma_tile's warp columns).
#   1. build the tests and the CLI;
#   2. the new paths' GPU tests alone, under a short timeout (a barrier bug would hang, not fail);
#   3. `fusejit run` medians (gpu_check.sh abrun) of the wgmma convs under "", conv_nchw=1|2, staging_prefetch=1
#      and of seed 3 (mma.sync halo patches) under "", halo_prefetch=1 and the 4-warp 128x64 tile.
# Logs go to $OUT (or ./gpu-out). AB_ITERS (default 20) trials a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export OUT=$out
BUILD_TARGETS="fusejit_tests fusejit" scripts/gpu_check.sh build | tail -2 || exit 1
timeout 300 build/tests/fusejit_tests \
  --gtest_filter='GpuConvMma.WgmmaNchw*:GpuConvMma.HaloPrefetch*:GpuConvMma.PatchHalo*:GpuConvMma.WgmmaStagingPrefetch*' \
  > "$out/new_paths_tests.log" 2>&1
echo "new-path GPU tests: rc=$? ($(grep -cE '^\[       OK \]' "$out/new_paths_tests.log") passed)"
grep -E '^\[  FAILED  \]|Failure' "$out/new_paths_tests.log" | head -20
d=bench/specs_conv_halo
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_seed1_bf16.yaml $d/conv_seed1_tf32.yaml $d/conv_seed1_fp32.yaml $d/conv_r56_bf16.yaml" \
  ABRUN_CONFIGS=";conv_nchw=1;conv_nchw=2;staging_prefetch=1" timeout 300 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_wgmma_convs.log" 2>/dev/null
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_seed3_bf16.yaml $d/conv_seed3_tf32.yaml" \
  ABRUN_CONFIGS=";halo_prefetch=1;mma_tile=128x64x3x32;mma_tile=128x64x3x32,halo_prefetch=1" \
  timeout 240 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_seed3.log" 2>/dev/null
for f in "$out/ab_wgmma_convs.log" "$out/ab_seed3.log"; do
  [ -f "$f" ] && grep -hE '^==|median|FAIL|error' "$f" | sed 's/ --backend cuda --samples 20000 --iters [0-9]*//'
done
