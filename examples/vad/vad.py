"""Voice activity detection through dvm: speaks a few sentences with pauses
(espeak-ng), runs the silero VAD model that the silero-vad wheel ships
(silero_vad_op18_ifless.onnx, compiled once by `dvm compile`) through
`dvm run` on every 32 ms chunk with its state carried, and prints the speech
segments. Then runs the silero-vad package itself (its default ONNX model on
ONNX Runtime) on the same recording and checks that the segments are the
same. The package's own chunking, context and segment logic are used for
both: only the engine under them differs.

Run ./examples/vad/setup.sh once, then, from the repository root:
    /usr/bin/python3 examples/vad/vad.py [--text "..."] [--keep DIR]
(Debian's Python: it has torch, which the silero-vad package imports.)
"""
import argparse
import os
import subprocess
import sys
import tempfile
import wave

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
sys.path.insert(0, os.path.join(HERE, "pydeps"))

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
import torch  # noqa: E402
from silero_vad import get_speech_timestamps, load_silero_vad  # noqa: E402
from silero_vad.utils_vad import OnnxWrapper  # noqa: E402

DVM = os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm"))
MODEL = os.path.join(HERE, "pydeps/silero_vad/data/silero_vad_op18_ifless.onnx")
RATE = 16000
TEXT = ('<speak>Voice activity detection finds where people speak. <break time="1500ms"/> '
        'This sentence comes after a pause of one and a half seconds. <break time="800ms"/> '
        'Short one. <break time="2s"/> And the last sentence ends the recording.</speak>')


def record(text, path):
    """Speech from espeak-ng (SSML, for the pauses) as float32 at 16 kHz."""
    subprocess.run(["espeak-ng", "-m", "-w", path, text], check=True)
    with wave.open(path) as w:
        rate, frames = w.getframerate(), w.readframes(w.getnframes())
    x = np.frombuffer(frames, np.int16).astype(np.float32) / 32768.0
    t = np.arange(int(len(x) * RATE / rate)) * (rate / RATE)  # linear resampling to 16 kHz
    return np.interp(t, np.arange(len(x)), x).astype(np.float32)


class DvmSession:
    """What OnnxWrapper needs of an onnxruntime.InferenceSession (run), done
    by `dvm run` on a module compiled once."""

    def __init__(self, onnx_path, tmp):
        self.tmp, self.module, self.calls = tmp, os.path.join(tmp, "vad.dvmb"), 0
        subprocess.run([DVM, "compile", onnx_path, "-o", self.module], check=True)

    def run(self, names, feeds):
        cmd = [DVM, "run", self.module, "--threads", "1"]
        for k, v in feeds.items():
            np.save(os.path.join(self.tmp, k + ".npy"), v)
            cmd += ["--input", f"{k}={os.path.join(self.tmp, k + '.npy')}"]
        outs = [os.path.join(self.tmp, f"out{i}.npy") for i in range(2)]
        for o in outs:
            cmd += ["--output", o]
        subprocess.run(cmd, check=True, capture_output=True)
        self.calls += 1
        return [np.load(o) for o in outs]


def seconds(segs):
    return [(round(s["start"] / RATE, 3), round(s["end"] / RATE, 3)) for s in segs]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default=TEXT, help="what espeak-ng says (SSML)")
    ap.add_argument("--keep", help="keep the recording and the module in this folder")
    args = ap.parse_args()
    onnxruntime.set_default_logger_severity(3)  # not its notes on unused initializers
    tmp = args.keep or tempfile.mkdtemp()
    os.makedirs(tmp, exist_ok=True)
    audio = record(args.text, os.path.join(tmp, "speech.wav"))
    print(f"recording: {len(audio) / RATE:.2f} s at {RATE} Hz (espeak-ng)")

    dvm_model = OnnxWrapper(MODEL, force_onnx_cpu=True)
    dvm_model.session = DvmSession(MODEL, tmp)
    mine = get_speech_timestamps(torch.from_numpy(audio), dvm_model, sampling_rate=RATE)
    print(f"dvm ({os.path.basename(MODEL)}, {dvm_model.session.calls} chunks through dvm run):")
    for start, end in seconds(mine):
        print(f"  speech {start:7.3f} s .. {end:7.3f} s")

    ref = get_speech_timestamps(torch.from_numpy(audio), load_silero_vad(onnx=True), sampling_rate=RATE)
    print("silero-vad package (silero_vad.onnx on ONNX Runtime):")
    for start, end in seconds(ref):
        print(f"  speech {start:7.3f} s .. {end:7.3f} s")
    if mine != ref:
        print("the segments differ")
        return 1
    print(f"same {len(ref)} segments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
