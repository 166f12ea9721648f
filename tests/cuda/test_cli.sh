#!/bin/bash
# dvm run/bench --device on a machine without CUDA (DVM_CUDA_DRIVER points at
# a library that does not exist, so the answers are the same with a GPU).
# Then, on the stand-in driver (fake_cuda.c), auto picks CUDA and says so.
# usage: test_cli.sh DVM ASM_DIR FAKE_CUDA_LIB
set -u
DVM=$1
ASM=$2
FAKE=$3
export DVM_CUDA_DRIVER=/nonexistent/libcuda.so.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$DVM" asm "$ASM/fib.dvms" -o "$tmp/fib.dvmb" || { echo "cannot assemble fib.dvms"; exit 1; }

"$DVM" run --device cuda "$tmp/fib.dvmb" -f fib -i n=10 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] || fail "run --device cuda succeeded without a device"
grep -q "the CUDA device is not available: /nonexistent/libcuda.so.1 not found (no NVIDIA driver)" "$tmp/err" ||
  fail "run --device cuda: unclear message: $(cat "$tmp/err")"

"$DVM" run "$tmp/fib.dvmb" -f fib -i n=10 >"$tmp/out" 2>"$tmp/err" || fail "run (auto) failed: $(cat "$tmp/err")"
grep -qx "f: int 55" "$tmp/out" || fail "run (auto): wrong result: $(cat "$tmp/out")"
[ ! -s "$tmp/err" ] || fail "run (auto) of a CPU-only module is not quiet: $(cat "$tmp/err")"
"$DVM" run "$tmp/fib.dvmb" -f fib -i n=10 --verbose >"$tmp/out" 2>"$tmp/err" || fail "run --verbose failed: $(cat "$tmp/err")"
grep -q "^dvm: running on cpu (the module has no CUDA functions" "$tmp/err" ||
  fail "run --verbose of a CPU-only module does not say why it runs on the cpu: $(cat "$tmp/err")"

# a module with both versions: auto falls back to the CPU one, saying why
# (without --verbose: the module was compiled for CUDA)
cat >"$tmp/both.dvms" <<'DVMS'
.func main regs=2
  .param x int
  .result y int
  imm r1, 1
  add r1, r0, r1
  ret (r1)
.end
.func "main@cuda" regs=2
  .param x int
  .result y int
  imm r1, 2
  add r1, r0, r1
  ret (r1)
.end
DVMS
"$DVM" asm "$tmp/both.dvms" -o "$tmp/both.dvmb" || fail "cannot assemble both.dvms"
"$DVM" run "$tmp/both.dvmb" -i x=40 >"$tmp/out" 2>"$tmp/err" || fail "run (auto) of both failed: $(cat "$tmp/err")"
grep -qx "y: int 41" "$tmp/out" || fail "run (auto) of both did not run the CPU version: $(cat "$tmp/out")"
grep -q "^dvm: running on cpu (.*/nonexistent/libcuda.so.1 not found (no NVIDIA driver))" "$tmp/err" ||
  fail "run (auto) does not say it runs on the cpu and why: $(cat "$tmp/err")"

"$DVM" run --device cpu "$tmp/fib.dvmb" -f fib -i n=10 >"$tmp/out" 2>"$tmp/err" || fail "run --device cpu failed"
[ ! -s "$tmp/err" ] || fail "run --device cpu printed: $(cat "$tmp/err")"

"$DVM" run --device tpu "$tmp/fib.dvmb" -f fib -i n=10 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "run --device tpu: expected a usage error (2)"
grep -q 'unknown device "tpu"' "$tmp/err" || fail "run --device tpu: $(cat "$tmp/err")"

"$DVM" asm "$ASM/matmul.dvms" -o "$tmp/mm.dvmb" || fail "cannot assemble matmul.dvms"
"$DVM" bench --device cuda "$tmp/mm.dvmb" --shape x=3x2 --iters 1 >"$tmp/out" 2>"$tmp/err"
[ $? -ne 0 ] || fail "bench --device cuda succeeded without a device"
grep -q "not found (no NVIDIA driver)" "$tmp/err" || fail "bench --device cuda: $(cat "$tmp/err")"

# on the stand-in driver: auto picks cuda, the run counts its host syncs
cat >"$tmp/mm.dvms" <<'DVMS'
.const w f32 [2, 3] x"0000803f0000004000004040000080400000a0400000c040"
.kernel matmul cuda 1
.shapefn matmul
.func "main@cuda" regs=6
  .param x tensor f32 [?, 2]
  .result y tensor f32 [?, 3]
  copy r1, r0, cuda
  const r2, $w
  copy r2, r2, cuda
  shapefn matmul, (r3), (r1, r2)
  alloc r4, f32, r3, cuda
  invoke matmul, -, (r4), (r1, r2), ()
  copy r5, r4, cpu
  ret (r5)
.end
DVMS
"$DVM" asm "$tmp/mm.dvms" -o "$tmp/mmc.dvmb" || fail "cannot assemble mm.dvms"
python3 -c "import numpy as np; np.save('$tmp/x.npy', np.array([[1, 2]], np.float32))"
DVM_CUDA_DRIVER=$FAKE DVM_CUBLAS=$FAKE "$DVM" run "$tmp/mmc.dvmb" -i "x=$tmp/x.npy" --stats >"$tmp/out" 2>"$tmp/err" ||
  fail "run (auto) on the stand-in driver failed: $(cat "$tmp/err")"
grep -qx "dvm: running on cuda:0 (dvm fake GPU, sm_1, 132 SMs)" "$tmp/err" ||
  fail "run (auto) does not say it runs on cuda: $(cat "$tmp/err")"
grep -q "y: f32\[1,3\] .*\[9, 12, 15\]" "$tmp/out" || fail "wrong result on cuda: $(cat "$tmp/out")"
grep -q "host_syncs=1 .*cuda_pool: in_use=256" "$tmp/out" || fail "--stats on cuda: $(cat "$tmp/out")"

echo "cuda cli: $fails failed"
[ $fails -eq 0 ]
