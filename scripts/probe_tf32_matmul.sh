#!/usr/bin/env bash
# GPU machine: tf32 matmul (B [K, N]) on the default plan (wgmma after the
# staging kernel transposes B) against mainloop=mma, `fusejit run` medians.
# Run after `scripts/gpu_check.sh build` (uses build/fusejit).
set -uo pipefail
cd "$(dirname "$0")/.."
for shape in 4096x4096x4096 1024x8192x8192 512x4096x11008; do
  set -- ${shape//x/ }
  f=/tmp/mm_$shape.yaml
  printf 'name: mm\nprecision: tf32\ninputs:\n  - {name: a, shape: [%s, %s]}\n  - {name: b, shape: [%s, %s]}\n  - {name: bias, shape: [%s]}\nops:\n  - {name: y0, op: matmul, args: [a, b]}\n  - {name: y1, op: add, args: [y0, bias]}\n  - {name: y, op: relu, args: [y1]}\noutputs: [y]\n' $1 $2 $2 $3 $3 > $f
  for cfg in "" "mainloop=mma"; do
    echo "tf32 matmul $shape config '$cfg': $(build/fusejit run $f --iters 30 ${cfg:+--config $cfg} 2>&1 | grep -oE 'PASS|FAIL|median [0-9.]+ ms|rel_l2 [0-9.e+-]+' | tr '\n' ' ')"
  done
done
