#!/usr/bin/env bash
# GPU machine, after `scripts/gpu_check.sh build` (uses build/fusejit): the
# default plan against a forced mainloop, `fusejit run` medians, chain bias + relu.
#   scripts/probe_mainloops.sh small    fp32 linear on small grids: default
#                                       (mma.sync split-K below 512 rows) vs mainloop=wgmma
#   scripts/probe_mainloops.sh matmul   tf32 matmul with B [K, N]: default (wgmma
#                                       after the staging kernel transposes B) vs mainloop=mma
set -uo pipefail
cd "$(dirname "$0")/.."

# spec OP PRECISION M K N -> path (linear: w [N, K]; matmul: b [K, N])
spec() {
  local op=$1 p=$2 m=$3 k=$4 n=$5 f="/tmp/probe_$1_$2_$3x$4x$5.yaml" w
  [ "$op" = linear ] && w="[$n, $k]" || w="[$k, $n]"
  printf 'name: probe\nprecision: %s\ninputs:\n  - {name: x, shape: [%s, %s]}\n  - {name: w, shape: %s}\n  - {name: b, shape: [%s]}\nops:\n  - {name: y0, op: %s, args: [x, w]}\n  - {name: y1, op: add, args: [y0, b]}\n  - {name: y, op: relu, args: [y1]}\noutputs: [y]\n' \
    "$p" "$m" "$k" "$w" "$n" "$op" > "$f"
  echo "$f"
}

probe() {  # OP PRECISION OTHER_CONFIG SHAPES...
  local op=$1 p=$2 other=$3
  shift 3
  for shape in "$@"; do
    local f
    f=$(spec "$op" "$p" ${shape//x/ })
    for cfg in "" "$other"; do
      echo "$p $op $shape config '$cfg': $(build/fusejit run "$f" --iters 50 ${cfg:+--config $cfg} 2>&1 |
        grep -oE 'PASS|FAIL|median [0-9.]+ ms|fj_[a-z0-9_]*(linear|matmul)[a-z0-9_]*' | sort -u | tr '\n' ' ')"
    done
  done
}

case "${1:-}" in
  small) probe linear fp32 mainloop=wgmma 100x1000x500 256x4096x512 32x8192x1024 128x2048x1024 64x4096x64 \
           1x4096x4096 512x1024x1024 ;;
  matmul) probe matmul tf32 mainloop=mma 4096x4096x4096 1024x8192x8192 512x4096x11008 ;;
  *) echo "usage: scripts/probe_mainloops.sh small|matmul" >&2; exit 2 ;;
esac
