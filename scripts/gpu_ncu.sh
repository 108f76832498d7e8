#!/usr/bin/env bash
# Profiles one launch of the fusejit kernel of each linear-chain spec given as
# PRECISION:MxKxN[:CONFIG] (e.g. bf16:16384x2048x2048) with ncu (real clocks), and
# prints the figures that say where the time goes. Logs under $OUT.
#   scripts/gpu_ncu.sh bf16:8192x8192x8192 fp32:4096x4096x4096:wgmma_tile=128x128x4
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
build=${BUILD_DIR:-build}
source <(sed -n '/^gemm_spec()/,/^}/p' scripts/gpu_check.sh)
metrics=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,dram__bytes.sum.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_wait,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,lts__t_sectors_srcunit_tex_op_write.sum,smsp__inst_executed_op_global_st.sum
for job in "$@"; do
  p=${job%%:*}; rest=${job#*:}; shape=${rest%%:*}; config=""
  [ "$rest" != "$shape" ] && config=${rest#*:}
  set -- ${shape//x/ }
  spec=$(gemm_spec "$p" "$1" "$2" "$3")
  log="$out/ncu_${p}_${shape}${config:+_${config//[^a-z0-9]/_}}.log"
  timeout 240 ncu --clock-control none --metrics "$metrics" -k regex:fj_linear -c 1 \
    "$build/fusejit" run "$spec" --iters 1 --warmup 0 --samples 1000 ${config:+--config "$config"} > "$log" 2>&1 || true
  echo "== $job"; grep -E "^\s+(gpu__|sm__|lts__|dram__|l1tex__|smsp__)" "$log" | sed 's/  */ /g'
done
