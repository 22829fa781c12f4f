#!/usr/bin/env bash
# The library calls the CUDA runtime only through src/cudart.c (which
# counts what matters next to NCCL) and launches kernels from src/*.cu.
# Fails when another C file of src/ calls a cuda* function directly.
set -u
src=${1:?usage: lint_cuda_layer.sh SRC_DIR}
hits=$(grep -nE '\bcuda[A-Z][A-Za-z0-9]*[[:space:]]*\(' "$src"/*.c | grep -v "^$src/cudart.c:" |
       grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/\*|\*)')
if [ -n "$hits" ]; then
  echo "FAIL: CUDA runtime called outside src/cudart.c:"
  echo "$hits"
  exit 1
fi
# Device or context synchronisation stalls NCCL kernels: none anywhere.
sync=$(grep -nE '\bcuda(DeviceSynchronize|ThreadSynchronize|CtxSynchronize)\b' "$src"/*.c "$src"/*.cu)
if [ -n "$sync" ]; then
  echo "FAIL: device synchronisation in the library:"
  echo "$sync"
  exit 1
fi
echo "lint.cuda_layer: PASS (CUDA runtime only from cudart.c, no device synchronisation)"
