#!/bin/sh
# The emulation's power, proved: each mutation of the generated code
# (DVM_CUDA_MUTATE, compiler/cuda_codegen.c) must make test_emulate fail
# with wrong results (its ROWS kernels suffice: they have all four). A mutation that passes means the emulation cannot
# see that kind of bug. Skips (77) where test_emulate does (no g++).
# usage: test_mutations.sh TEST_EMULATE SHIM_DIR
set -u
emulate=$1 shim=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0
for m in sync_before_partials sync_after_partials shuffle_lane tail_last; do
  DVM_CUDA_MUTATE=$m "$emulate" "$shim" rows >"$log" 2>&1
  rc=$?
  [ $rc -eq 77 ] && { cat "$log"; exit 77; }
  wrong=$(grep -c 'CHECK failed: matches' "$log")
  if [ $rc -eq 1 ] && [ "$wrong" -gt 0 ]; then
    echo "mutation $m: caught ($wrong wrong results; $(tail -1 "$log"))"
  else
    echo "mutation $m: NOT caught (exit $rc, $wrong wrong results)"
    tail -5 "$log"
    fail=1
  fi
done
exit $fail
