#!/bin/sh
# Runs a program that needs a CUDA device, or prints SKIP where none is
# visible (CI): the apps themselves rightly fail without one.
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: no CUDA device visible (nvidia-smi -L)"
  exit 0
fi
exec "$@"
