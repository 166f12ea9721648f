"""The corpus of models nobody here designed, with their inputs: PyTorch
exports that setup.sh makes with tests/exported/export_models.py (into
build-data/exported, or $DVM_EXPORTED), packaged models, and the fixture
models."""
import os

import numpy as np

from dvmtest.paths import EXPORTED, MODELS as FIXTURES, REAL_MODELS as REAL

# model -> (file, input name -> (dtype, dims with symbols, int range), bindings)
SEQ = [dict(batch=1, seq=1), dict(batch=2, seq=7), dict(batch=3, seq=13)]
IMG = [dict(batch=1, height=32, width=32), dict(batch=2, height=64, width=96), dict(batch=1, height=40, width=56)]
MODELS = {
    "bert_tiny": (os.path.join(EXPORTED, "bert_tiny.onnx"),
                  {"input_ids": ("i64", ["batch", "seq"], 1000), "attention_mask": ("i64", ["batch", "seq"], 2),
                   "token_type_ids": ("i64", ["batch", "seq"], 2)}, SEQ),
    "gpt2_tiny": (os.path.join(EXPORTED, "gpt2_tiny.onnx"), {"input_ids": ("i64", ["batch", "seq"], 1000)}, SEQ),
    "yolo_tiny": (os.path.join(EXPORTED, "yolo_tiny.onnx"), {"images": ("f32", ["batch", 3, "height", "width"], 0)}, IMG),
    "speech_tiny": (os.path.join(EXPORTED, "speech_tiny.onnx"), {"audio": ("f32", ["batch", "samples"], 0)},
                    [dict(batch=1, samples=1600), dict(batch=2, samples=3203), dict(batch=3, samples=401)]),
    # shipped in PyPI wheels (tests/real/fetch_models.py, at setup); Paddle's
    # unnamed dims are the fresh symbols unk0, unk1, ...
    "ppocr_det": (os.path.join(REAL, "ch_PP-OCRv4_det_infer.onnx"), {"x": ("f32", ["unk0", 3, "unk1", "unk2"], 0)},
                  [dict(unk0=1, unk1=64, unk2=96), dict(unk0=2, unk1=96, unk2=160)]),
    "ppocr_rec": (os.path.join(REAL, "ch_PP-OCRv4_rec_infer.onnx"), {"x": ("f32", ["unk0", 3, "unk1", "unk2"], 0)},
                  [dict(unk0=1, unk1=48, unk2=80), dict(unk0=3, unk1=48, unk2=320)]),
    "bert_fixture": (os.path.join(FIXTURES, "bert.onnx"),
                     {"ids": ("i64", ["batch", "seq"], 50), "mask": ("i64", ["batch", "seq"], 2)}, SEQ),
    "resnet_fixture": (os.path.join(FIXTURES, "resnet.onnx"),
                       {"image": ("f32", ["batch", 3, "height", "width"], 0)},
                       [dict(batch=1, height=32, width=32), dict(batch=2, height=17, width=23)]),
    "mlp_fixture": (os.path.join(FIXTURES, "mlp.onnx"), {"x": ("f32", ["batch", 16], 0)},
                    [dict(batch=1), dict(batch=5)]),
}


def feeds_for(spec, env, rng):
    feeds = {}
    for name, (dt, dims, hi) in spec.items():
        shape = [env[d] if isinstance(d, str) else d for d in dims]
        if dt == "i64":
            feeds[name] = rng.integers(0, hi, size=shape, dtype=np.int64)
            if name.endswith("mask"):
                feeds[name][..., 0] = 1
        else:
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
    return feeds
