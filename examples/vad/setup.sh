#!/usr/bin/env bash
# Installs what the voice-activity example needs besides dvm (not needed to
# build or test dvm): espeak-ng to make a recording, and Debian's Python
# with torch (python3-torch; the PyPI wheel pulls gigabytes of CUDA
# libraries) for the silero-vad package, which imports torch. The
# silero-vad and onnxruntime wheels for that interpreter are unpacked into
# examples/vad/pydeps (git-ignored) with `pip download --no-deps`, so that
# Debian's numpy and torch stay as they are. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(espeak-ng python3-torch python3-numpy python3-packaging python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "vad setup: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

wheels=(silero-vad==6.2.3 onnxruntime==1.20.1)
if [ "$(cat pydeps/wheels.txt 2>/dev/null)" != "${wheels[*]}" ]; then
  rm -rf pydeps && mkdir -p pydeps/whl
  /usr/bin/python3 -m pip download -q --no-deps --dest pydeps/whl "${wheels[@]}"
  for w in pydeps/whl/*.whl; do /usr/bin/python3 -m zipfile -e "$w" pydeps; done
  rm -rf pydeps/whl
  echo "${wheels[*]}" > pydeps/wheels.txt
fi
echo "vad setup: ready (run: /usr/bin/python3 examples/vad/vad.py)"
