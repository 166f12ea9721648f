#!/usr/bin/env bash
# The dvm command as a user meets it: results, exit codes (0 ok, 1 runtime
# error, 2 usage or input error) and messages that name what is wrong.
# usage: test_cli.sh DVM SOURCE_ROOT
set -u
dvm=$1
src=$2
fx=$src/tests/cli
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

# expect RC PATTERN -- COMMAND...: exit code RC and output matching PATTERN
expect() {
  local rc=$1 pattern=$2
  shift 3
  local out
  out=$("$@" 2>&1)
  local got=$?
  if [ "$got" -eq "$rc" ] && grep -qE -- "$pattern" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $* -> exit $got (want $rc), output:" >&2
    echo "$out" | head -5 >&2
    echo "  (wanted /$pattern/)" >&2
  fi
}

for p in matmul guard tuple sequence; do
  expect 0 '' -- "$dvm" asm "$src/tests/asm/$p.dvms" -o "$tmp/$p.dvmb"
done

# success, printed and saved results
expect 0 'y: f32\[3,3\] min=1 max=9 mean=.* \[1, 2, 3, 4, 5, 6, 5, 7, ...\]' -- \
  "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_f32.npy"
expect 0 '' -- "$dvm" run "$tmp/matmul.dvmb" --input x="$fx/x_3x2_f32.npy" --output "$tmp/y.npy"
expect 0 'y: f32\[3,3\] min=1 max=9' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_f32.pb"
printf 'not a tensor' > "$tmp/bad.pb"
expect 2 'bad.pb: not an ONNX TensorProto' -- "$dvm" run "$tmp/matmul.dvmb" --input "$tmp/bad.pb"
expect 0 '' -- test -s "$tmp/y.npy"
expect 0 'batch: int 2' -- "$dvm" run "$tmp/guard.dvmb" --input mask="$fx/mask_2x7_f32.npy" \
  --input ids="$fx/ids_2x7_i64.npy"
expect 0 'stats: instructions=' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_f32.npy" --stats

# sequences (tuples): a SequenceProto .pb or a directory of 0.npy, 1.npy, ... in and out
expect 0 'n: int 2' -- "$dvm" run "$tmp/sequence.dvmb" --function takes --input s="$fx/seq_2_f32.pb"
mkdir -p "$tmp/items" && cp "$fx/x_3x2_f32.npy" "$tmp/items/0.npy"
expect 0 'n: int 1' -- "$dvm" run "$tmp/sequence.dvmb" --function takes --input s="$tmp/items"
cp "$fx/x_3x2_i64.npy" "$tmp/items/1.npy"
expect 2 'input "s": every item must be a f32 tensor' -- "$dvm" run "$tmp/sequence.dvmb" --function takes --input "$tmp/items"
expect 2 'x_6_f32.npy: a sequence is a .pb file' -- "$dvm" run "$tmp/sequence.dvmb" --function takes --input "$fx/x_6_f32.npy"
expect 2 'bad.pb: not an ONNX SequenceProto' -- "$dvm" run "$tmp/sequence.dvmb" --function takes --input "$tmp/bad.pb"
expect 0 's: tuple \(f32\[6\].*; f32\[6\]' -- "$dvm" run "$tmp/sequence.dvmb" --function pair --input "$fx/x_6_f32.npy"
expect 0 '' -- "$dvm" run "$tmp/sequence.dvmb" --function pair --input "$fx/x_6_f32.npy" --output "$tmp/s.pb"
expect 0 'n: int 2' -- "$dvm" run "$tmp/sequence.dvmb" --function takes --input s="$tmp/s.pb"
expect 0 '' -- "$dvm" run "$tmp/sequence.dvmb" --function pair --input "$fx/x_6_f32.npy" --output "$tmp/sdir"
expect 0 '' -- cmp "$tmp/sdir/1.npy" "$fx/x_6_f32.npy"
expect 2 'cannot be saved as .npy' -- "$dvm" run "$tmp/sequence.dvmb" --function pair --input "$fx/x_6_f32.npy" --output "$tmp/s.npy"

# bad user input: exit 2, naming the input and what was expected
expect 2 'missing.npy' -- "$dvm" run "$tmp/matmul.dvmb" --input "$tmp/missing.npy"
expect 2 'input "x": dtype must be f32, got i64' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_i64.npy"
expect 2 'input "x": rank must be 2, got 1' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_6_f32.npy"
expect 2 'input "x" dim 1 must be 2, got 3' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x3_f32.npy"
expect 2 'input "mask" dim 1 \(seq\) must be 7' -- "$dvm" run "$tmp/guard.dvmb" \
  --input "$fx/ids_2x7_i64.npy" --input "$fx/mask_2x9_f32.npy"
expect 2 'takes 2 inputs; input 1 \("mask"\) is missing' -- "$dvm" run "$tmp/guard.dvmb" --input "$fx/ids_2x7_i64.npy"
expect 2 'one too many' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_f32.npy" --input "$fx/x_3x2_f32.npy"
expect 2 'no input named "nope"' -- "$dvm" run "$tmp/matmul.dvmb" --input nope="$fx/x_3x2_f32.npy"
expect 2 'truncated.npy' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/truncated.npy"
expect 2 'no function "other"' -- "$dvm" run "$tmp/matmul.dvmb" --function other --input "$fx/x_3x2_f32.npy"
expect 2 'unknown device' -- "$dvm" run "$tmp/matmul.dvmb" --device tpu
# (no CUDA driver, so that this holds on a machine with a GPU too)
expect 2 'CUDA device is not available' -- env DVM_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
  "$dvm" run "$tmp/matmul.dvmb" --device cuda --input "$fx/x_3x2_f32.npy"
head -c 100 "$tmp/matmul.dvmb" > "$tmp/cut.dvmb"
expect 2 'header says the file is' -- "$dvm" run "$tmp/cut.dvmb"
expect 2 'bad magic' -- "$dvm" inspect "$fx/x_3x2_f32.npy"
expect 2 'usage' -- "$dvm" run
expect 2 'unknown command' -- "$dvm" frobnicate
printf '.func main regs=1\n  bogus r0\n.end\n' > "$tmp/bad.dvms"
expect 2 'bad.dvms:2:3: unknown instruction "bogus"' -- "$dvm" asm "$tmp/bad.dvms" -o "$tmp/bad.dvmb"
expect 1 '' -- test -e "$tmp/bad.dvmb"

# runtime errors: exit 1, naming function, instruction and message
expect 1 'function "dies", instruction 0 \(fatal\).*this function always fails' -- \
  "$dvm" run "$tmp/tuple.dvmb" --function dies

# bench: random inputs of the given shapes, a JSON line for scripts
expect 0 '"median_ms":' -- "$dvm" bench "$tmp/matmul.dvmb" --dim batch=16 --iters 5 --warmup 1
expect 0 'latency ms: median' -- "$dvm" bench "$tmp/guard.dvmb" --shape ids=2x7 --shape mask=2x7 --range ids=0..3 --iters 3
expect 2 'dim 0 is batch: give --dim batch=N' -- "$dvm" bench "$tmp/matmul.dvmb"
# --profile: per-site, per-op and per-class tables; --trace: Chrome trace JSON
expect 0 'invoke@[0-9]+ +- +matmul f32\[3,2\] f32\[2,3\] -> f32\[3,3\]' -- \
  "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_f32.npy" --profile
expect 0 'instruction class' -- "$dvm" bench "$tmp/matmul.dvmb" --dim batch=4 --iters 3 --warmup 0 --profile
expect 0 'trace: 6 events written' -- "$dvm" bench "$tmp/matmul.dvmb" --dim batch=4 --iters 3 --warmup 0 \
  --trace "$tmp/trace.json"
expect 0 '^3 3$' -- python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["traceEvents"]
print(sum(x.get("cat") == "kernel" and x["name"] == "matmul" and x["ph"] == "X" for x in e),
      sum(x.get("cat") == "invocation" and x["dur"] > 0 for x in e))' "$tmp/trace.json"
expect 2 'cannot write trace' -- "$dvm" run "$tmp/matmul.dvmb" --input "$fx/x_3x2_f32.npy" --trace "$tmp/no/t.json"
expect 2 'input "x" dim 1 must be 2, got 5' -- "$dvm" bench "$tmp/matmul.dvmb" --shape x=3x5

# names of any length and characters: an input named with '/' and '=', an
# output named with a 137-character JSON string (as some exported models do)
long=$(python3 - "$tmp/names.onnx" <<'PY'
import sys
from onnx import TensorProto, helper, save
i, o = "in/put=x", '{"name": "' + "o" * 108 + '", "path": "a/b=c"}'
g = helper.make_graph([helper.make_node("Neg", [i], [o])], "g",
                      [helper.make_tensor_value_info(i, TensorProto.FLOAT, ["n", 2])],
                      [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n", 2])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
print(o)
PY
)
expect 0 '' -- test "${#long}" -eq 137
expect 0 '' -- "$dvm" compile "$tmp/names.onnx" -o "$tmp/names.dvmb"
expect 0 '' -- "$dvm" run "$tmp/names.dvmb" --input "in/put=x=$fx/x_3x2_f32.npy" --output "$long=$tmp/neg.npy"
expect 0 '^-1 0$' -- python3 -c 'import numpy, sys; print(*numpy.load(sys.argv[1])[0].astype(int))' "$tmp/neg.npy"
expect 2 'has no input named "in/put" \(nor is it a file\)' -- \
  "$dvm" run "$tmp/names.dvmb" --input "in/put=$fx/x_3x2_f32.npy"
expect 0 'latency ms: median' -- "$dvm" bench "$tmp/names.dvmb" --shape "in/put=x=3x2" --iters 2 --warmup 0

# every subcommand has --help
for c in run asm disasm inspect bench; do expect 0 'usage: dvm' -- "$dvm" "$c" --help; done
expect 0 'commands:' -- "$dvm" --help

# inspect and the disasm/asm round trip
expect 0 'input  x: tensor f32\[batch, 2\]' -- "$dvm" inspect "$tmp/matmul.dvmb"
"$dvm" disasm "$tmp/matmul.dvmb" > "$tmp/m.dvms"
expect 0 '' -- "$dvm" asm "$tmp/m.dvms" -o "$tmp/m2.dvmb"
expect 0 '' -- cmp "$tmp/matmul.dvmb" "$tmp/m2.dvmb"

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
