#!/usr/bin/env bash
# The library calls the CUDA runtime only through src/cuda/cudart.c (which
# counts what matters next to NCCL) and launches kernels from .cu files.
# Fails when another C file under src/ calls a cuda* function directly.
set -u
src=${1:?usage: lint_cuda_layer.sh SRC_DIR}
hits=$(grep -rnE --include='*.c' '\bcuda[A-Z][A-Za-z0-9]*[[:space:]]*\(' "$src" | grep -v "^$src/cuda/cudart.c:" |
       grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/\*|\*)')
if [ -n "$hits" ]; then
  echo "FAIL: CUDA runtime called outside src/cuda/cudart.c:"
  echo "$hits"
  exit 1
fi
# Device or context synchronisation stalls NCCL kernels: none anywhere.
sync=$(grep -rnE --include='*.c' --include='*.cu' '\bcuda(DeviceSynchronize|ThreadSynchronize|CtxSynchronize)\b' "$src")
if [ -n "$sync" ]; then
  echo "FAIL: device synchronisation in the library:"
  echo "$sync"
  exit 1
fi
echo "lint.cuda_layer: PASS (CUDA runtime only from cudart.c, no device synchronisation)"
