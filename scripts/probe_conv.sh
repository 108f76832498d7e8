#!/usr/bin/env bash
# GPU machine, after `scripts/gpu_check.sh build` (uses build/fusejit): conv
# chains of bench/bench_conv.py under several codegen configs (`fusejit run`
# medians, L2 flushed), and each kernel's time and DRAM traffic under ncu for
# the default config.
#   scripts/probe_conv.sh PROBLEMS MODES [CONFIG...]
#   e.g. scripts/probe_conv.sh 1,5 bf16,tf32 "" wgmma_schedule=pingpong
# Output: one line per (spec, config); ncu lines to $OUT/probe_conv_ncu.log.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/probe_conv.sh PROBLEMS MODES [CONFIG...]" >&2; exit 2; }
problems=$1 modes=$2
shift 2
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=("")
dir=$(mktemp -d)
python3 bench/bench_conv.py --print-specs --spec-dir "$dir" --problems "$problems" --modes "$modes" > /dev/null
out=${OUT:-/tmp}
for f in "$dir"/*.yaml; do
  for cfg in "${configs[@]}"; do
    echo "$(basename "$f" .yaml) config '$cfg': $(build/fusejit run "$f" --iters 30 --samples 2000 ${cfg:+--config $cfg} 2>&1 |
      grep -oE 'PASS|FAIL|median [0-9.]+ ms|fj_[a-z0-9_]*conv2d[a-z0-9_]*' | sort -u | tr '\n' ' ')"
  done
  if command -v ncu > /dev/null; then
    { echo "== $(basename "$f")"
      ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        -k regex:fj_ --launch-count 4 build/fusejit run "$f" --iters 1 --warmup 0 --samples 100 2>&1 |
        grep -E "fj_|gpu__time|dram__bytes" ; } >> "$out/probe_conv_ncu.log"
  fi
done
rm -rf "$dir"
