#!/usr/bin/env bash
# dvm repl driven by a script (checked against expected lines) and through a
# pseudo-terminal with tmux, the way a person types.
# usage: test_repl.sh DVM SOURCE_ROOT
set -u
dvm=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; tmux kill-session -t dvmrepl$$ 2>/dev/null' EXIT
pass=0 fail=0
check() { # check DESCRIPTION PATTERN FILE
  if grep -qE -- "$2" "$3"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: no /$2/" >&2; fi
}

"$dvm" asm "$src/examples/mlp.dvms" -o "$tmp/mlp.dvmb" || exit 1
cd "$src"
"$dvm" repl "$tmp/mlp.dvmb" --input tests/repl/x_2.npy --script tests/repl/session.txt > "$tmp/out.txt" 2>&1
rc=$?
out=$tmp/out.txt
check "exit code" '' "$out"; [ $rc -eq 0 ] || { fail=$((fail + 1)); echo "FAIL: exit $rc" >&2; }
check "help" 'break SPEC' "$out"
check "breakpoint set" 'breakpoint 1: node layer2' "$out"
check "breakpoint hit" '^=> main:7  const +r5, \$w2' "$out"
check "shape in run 1" 'tensor f32\[2,8\] on cpu' "$out"
check "tensor printed" 'r3: on cpu, f32\[2,8\] min=.* max=.* mean=.* nan=0 inf=0 \[' "$out"
check "disasm marks the current instruction" '^=>    7  const' "$out"
check "where" '^#0 main:7 \(const\) node layer2' "$out"
check "run 1 finished" '^  y: f32\[2,3\]' "$out"
check "shape in run 2" 'tensor f32\[5,8\] on cpu' "$out"
check "run 2 finished" '^  y: f32\[5,3\]' "$out"
check "error shown" 'error: function "main", instruction 0 \(guard\), node "input": input "x" dim 1 must be 4, got 3' "$out"
check "session usable after error" '^=> main:0  guard' "$out"
check "step 3" '^=> main:3  alloc' "$out"
check "next" '^=> main:4  invoke' "$out"
check "finish" 'finished: main returned' "$out"
check "mem" 'cpu pool: in use 0 bytes' "$out"
check "bad breakpoint" 'error: "99" is not an instruction of main' "$out"
check "bad function" 'error: no function "nosuch"' "$out"
check "bad register" 'error: expected a register' "$out"
check "save error" 'error: /dev/null/x.npy' "$out"
check "unknown command" 'error: unknown command "bogus"' "$out"

# the same from a pipe
printf 'run\nquit\n' | "$dvm" repl "$tmp/mlp.dvmb" --input x=tests/repl/x_2.npy > "$tmp/pipe.txt" 2>&1
check "pipe" '^  y: f32\[2,3\]' "$tmp/pipe.txt"

# interactively through a pseudo-terminal: completion, history, editing
if command -v tmux >/dev/null; then
  s=dvmrepl$$
  tmux new-session -d -s "$s" -x 160 -y 50 "$dvm repl $tmp/mlp.dvmb --input tests/repl/x_2.npy; sleep 5"
  sleep 0.5
  tmux send-keys -t "$s" 'brea' Tab ' kernel add' Enter
  sleep 0.3
  tmux send-keys -t "$s" 'run' Enter
  sleep 0.5
  tmux send-keys -t "$s" 'print r4' Enter
  sleep 0.3
  tmux send-keys -t "$s" Up Enter   # history: print r4 again
  sleep 0.3
  tmux capture-pane -t "$s" -p > "$tmp/tty.txt"
  tmux send-keys -t "$s" 'quit' Enter
  check "tty prompt" '^\(dvm\) ' "$tmp/tty.txt"
  check "tty completion" 'breakpoint 1: kernel add' "$tmp/tty.txt"
  check "tty breakpoint" '=> main:6  invoke +add' "$tmp/tty.txt"
  [ "$(grep -c '^r4: on cpu, f32\[8\]' "$tmp/tty.txt")" -eq 2 ] && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL: history did not repeat print" >&2; cat "$tmp/tty.txt" >&2; }
else
  echo "tmux not installed: the pseudo-terminal test is skipped" >&2
fi

echo "repl: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
