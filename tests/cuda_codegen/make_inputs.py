"""Random inputs for the fixture models at awkward sizes, and the `dvm run`
arguments that bind them: writes DIR/<model>.args and the .npy files."""
import os
import sys

import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
inputs = {
    "mlp": {"x": rng.standard_normal((3, 16), dtype=np.float32)},
    "bert": {"ids": rng.integers(0, 10, (2, 7), dtype=np.int64),
             "mask": (rng.random((2, 7)) < 0.8).astype(np.int64)},
    "resnet": {"image": rng.standard_normal((1, 3, 17, 19), dtype=np.float32)},
    "control": {"x": rng.standard_normal((5,), dtype=np.float32)},
}
for model, tensors in inputs.items():
    args = []
    for name, value in tensors.items():
        path = os.path.join(out, f"{model}.{name}.npy")
        np.save(path, value)
        args.append(f"--input {name}={path}")
    with open(os.path.join(out, f"{model}.args"), "w") as f:
        f.write(" ".join(args))
