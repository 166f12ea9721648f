#!/usr/bin/env bash
# llama.cpp for bench/bench_generate.py's llama.cpp column and
# bench/bench_serve_generate.py's llama-server: the llama.cpp tree
# that llama-cpp-python's source distribution on PyPI vendors, built for this
# CPU (GGML_NATIVE) into build-data/llamacpp, and what its checkpoint converter
# needs, installed into build-data/genai-venv (setup.sh makes that venv).
# Separate from setup.sh: only this benchmark uses it, and the build takes
# about ten minutes on two cores. Prints the build folder to pass as --llamacpp.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
dest=build-data/llamacpp
src=$dest/llama_cpp_python-$version/vendor/llama.cpp
venv=build-data/genai-venv
[ -x $venv/bin/python ] || { echo "setup_llamacpp: run ./setup.sh first (it makes $venv)" >&2; exit 1; }
$venv/bin/pip install -q -r bench/requirements-llamacpp.txt
if [ ! -d "$src" ]; then
  mkdir -p $dest
  $venv/bin/pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d $dest
  tar -xzf $dest/llama_cpp_python-$version.tar.gz -C $dest
fi
log=$dest/build.log
# For this CPU, but without AMX where it has it: llama.cpp's AMX kernel for
# q4_0 (ggml_backend_amx_mul_mat) crashed with SIGSEGV on an Intel Xeon
# with AMX (docs/performance.md); there its AVX-512 kernels are built.
isa=(-DGGML_NATIVE=ON)
if grep -qw amx_int8 /proc/cpuinfo; then
  isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON
       -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON)
fi
{ cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release "${isa[@]}" -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF &&
  cmake --build "$src/build" -j"$(nproc)" --target llama-batched-bench llama-quantize llama-server; } >"$log" 2>&1 ||
  { tail -30 "$log" >&2; echo "setup_llamacpp: the build failed (all of it in $log)" >&2; exit 1; }
echo "$src/build"
