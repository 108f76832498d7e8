#!/usr/bin/env bash
# GPU machine, one device call (~5 min): check, then time, the queued conv experiments against the defaults.
# (Session 39's set ran in session 40: bench/results/ab_conv_paths_H200_20261128.log; session 40's set —
# NCHW / streamed / ping-pong halos, seed 3's register cap — and the fixed 16-bit NCHW halos in session 41:
# ab_conv_halo_nchw_H200_20261128.log.) Now:
#   1. build the tests and the CLI;
#   2. the 2-block cluster convs' GPU tests (wgmma_cluster=2: the filter's k-tiles multicast to a pair of
#      patches' blocks) under a short timeout (a barrier bug would hang, not fail);
#   3. `fusejit run` medians (gpu_check.sh abrun): 128x256x56^2 (tf32, bf16: the row level with torch.compile),
#      seed 1 and 32x64x224^2 under the default, clusters (default tile), 128x256 and 128x128 cluster tiles.
# Logs go to $OUT (or ./gpu-out). AB_ITERS (default 20) trials a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export OUT=$out
BUILD_TARGETS="fusejit_tests fusejit" scripts/gpu_check.sh build | tail -2 || exit 1
timeout 150 build/tests/fusejit_tests --gtest_filter='GpuConvMma.WgmmaCluster*' > "$out/cluster_tests.log" 2>&1
echo "cluster conv GPU tests: rc=$? ($(grep -cE '^\[       OK \]' "$out/cluster_tests.log") passed)"
grep -E '^\[  FAILED  \]|Failure' -A3 "$out/cluster_tests.log" | head -30
d=bench/specs_conv_halo
ABRUN_ITERS=${AB_ITERS:-20} ABRUN_SPECS="$d/conv_r56_tf32.yaml $d/conv_r56_bf16.yaml" \
  ABRUN_CONFIGS=";wgmma_cluster=2;wgmma_tile=128x256x3x16,wgmma_cluster=2;wgmma_tile=128x128x4x16,wgmma_cluster=2" \
  timeout 120 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_cluster_r56.log" 2>/dev/null
ABRUN_ITERS=${AB_ITERS:-20} \
  ABRUN_SPECS="$d/conv_seed1_bf16.yaml $d/conv_seed1_tf32.yaml" \
  ABRUN_CONFIGS=";wgmma_cluster=2" \
  timeout 60 scripts/gpu_check.sh abrun > /dev/null 2>&1
mv "$out/abrun.log" "$out/ab_cluster_seed1.log" 2>/dev/null
for f in "$out/ab_cluster_r56.log" "$out/ab_cluster_seed1.log"; do
  [ -f "$f" ] && grep -hE '^==|median|FAIL|error' "$f" | sed 's/ --backend cuda --samples 20000 --iters [0-9]*//'
done
