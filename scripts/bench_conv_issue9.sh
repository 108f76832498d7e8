#!/usr/bin/env bash
# GPU machine: issue 9's figures, the sides it names, in two device calls (each ~8-9 min):
#   scripts/bench_conv_issue9.sh a   fp32 every row (cudnn, eager, fusejit: its target is against eager), then
#                                    tf32 every row (eager, torch.compile default and max-autotune-no-cudagraphs)
#   scripts/bench_conv_issue9.sh b   bf16 every row as tf32, then seeds 1 and 3 tuned (fusejit-tuned:
#                                    autotune=force, ~40 s a row) against both compile modes in tf32 and bf16
#   scripts/bench_conv_issue9.sh m   tf32 and bf16 every row (eager, both torch.compile modes, fusejit): the standing
#                                    against max-autotune without the fp32 and tuned runs (~9 min)
#   scripts/bench_conv_issue9.sh c   DRAM bytes written by the pooled / reduced chains vs their outputs (ncu;
#                                    bench/conv_dram_writes.py; ~2 min, can share a call with other work)
# Every side of a row runs in one process on the same inputs (bench/bench_conv.py). COMMIT names the commit in
# the results (the device copy's git metadata may be stale); PROBLEMS (part m, default all) the rows; BUDGET (default 230 s) bounds each bench process (two a call: under the 600 s a device call may take).
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?usage: scripts/bench_conv_issue9.sh a|b|m|c}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
budget=${BUDGET:-230}
BUILD_TARGETS="fusejit fusejit_c" scripts/gpu_check.sh build | tail -1 || exit 1
out=${OUT:-$PWD/gpu-out}
run() {  # tag, problems, modes, sides
  CONV_BENCH_ARGS="--problems $2 --modes $3 --sides $4 --compile-mode both --commit $commit --tag issue9_$1 --time-budget $budget" \
    timeout $((budget + 30)) scripts/gpu_check.sh convbench 2>&1 | grep -E '^\| [0-9]+ \||^\| (fp32|tf32|bf16) \||ERR'
}
case $part in
  a) run fp32 all fp32 cudnn,eager,fusejit
     run tf32 all tf32 eager,compile,fusejit ;;
  b) run bf16 all bf16 eager,compile,fusejit
     run tuned 1,2 tf32,bf16 compile,fusejit,fusejit-tuned ;;
  m) run tf32 "${PROBLEMS:-all}" tf32 eager,compile,fusejit
     run bf16 "${PROBLEMS:-all}" bf16 eager,compile,fusejit ;;
  c) timeout 300 python3 bench/conv_dram_writes.py --commit "$commit" --out "$out" | tail -16 ;;
  *) echo "unknown part '$part' (a, b, m or c)" >&2; exit 2 ;;
esac
