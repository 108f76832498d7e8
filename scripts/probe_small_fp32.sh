#!/usr/bin/env bash
# GPU machine: fp32 (3xTF32) linear + bias + relu on small grids, the default
# plan (mma.sync split-K where the heuristic picks it) against mainloop=wgmma
# (the staging kernel + wgmma), `fusejit run` medians. After
# `scripts/gpu_check.sh build` (uses build/fusejit).
set -uo pipefail
cd "$(dirname "$0")/.."
for shape in 100x1000x500 256x4096x512 32x8192x1024 128x2048x1024 64x4096x64 1x4096x4096 512x1024x1024; do
  set -- ${shape//x/ }
  f=/tmp/lin_$shape.yaml
  printf 'name: lin\nprecision: fp32\ninputs:\n  - {name: x, shape: [%s, %s]}\n  - {name: w, shape: [%s, %s]}\n  - {name: b, shape: [%s]}\nops:\n  - {name: y0, op: linear, args: [x, w]}\n  - {name: y1, op: add, args: [y0, b]}\n  - {name: y, op: relu, args: [y1]}\noutputs: [y]\n' $1 $2 $3 $2 $3 > $f
  for cfg in "" "mainloop=wgmma"; do
    echo "fp32 linear $shape config '$cfg': $(build/fusejit run $f --iters 50 ${cfg:+--config $cfg} 2>&1 | grep -oE 'PASS|FAIL|median [0-9.]+ ms|fj_linear[a-z0-9_]*' | sort -u | tr '\n' ' ')"
  done
done
