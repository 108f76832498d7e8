#!/usr/bin/env bash
# GPU machine, after `scripts/gpu_check.sh build`: where a kernel's warps
# wait. For each config, one launch of KERNEL_REGEX (default fj_conv2d) in
# `fusejit run SPEC` under ncu: the stall reasons per issued instruction, the
# scheduler and throughput figures, and the SASS with its stall samples
# ($OUT/ncu_stalls_<n>_sass.csv).
#   scripts/ncu_stalls.sh SPEC [CONFIG...]
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/ncu_stalls.sh SPEC [CONFIG...]" >&2; exit 2; }
spec=$1
shift
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=("")
out=${OUT:-/tmp}
kernel=${KERNEL_REGEX:-fj_conv2d}
n=0
for cfg in "${configs[@]}"; do
  n=$((n + 1))
  rep="$out/ncu_stalls_$n"
  echo "== $(basename "$spec") config '$cfg'"
  timeout 240 ncu --clock-control none -k "regex:$kernel" -c 1 -o "$rep" -f \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section SourceCounters \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,smsp__cycles_active.avg" \
    build/fusejit run "$spec" --iters 1 --warmup 0 --samples 100 ${cfg:+--config $cfg} > /dev/null 2>&1
  timeout 120 ncu -i "$rep.ncu-rep" --page details --print-units base 2>&1 |
    grep -E "stalled_|inst_executed|cycles_active|Duration|Issue Slots|Eligible|Active Warps|No Eligible|Throughput" |
    awk '$NF != 0'
  timeout 120 ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep"_sass.csv 2>/dev/null
  rm -f "$rep.ncu-rep"
done
