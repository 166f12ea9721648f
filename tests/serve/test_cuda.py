"""dvm serve's CUDA path on the stand-in driver (tests/cuda/fake_cuda.c,
which runs the generated kernels on the host and faults when the host
touches device memory): a model compiled for cpu,cuda with `device = cuda`,
batched and padded by length bucket from concurrent clients, answers as
`dvm run --device cpu` does within 1e-4, and its CUDA pool shows in the
metrics. Skipped without the stand-in (DVM_FAKE_CUDA) or NVRTC."""
import os
import subprocess
import tempfile

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype

from conftest import DVM, MODELS, Server, metric, sentence

FAKE = os.environ.get("DVM_FAKE_CUDA")

CONFIG = ("device = cuda\nbatch = batch\nmax_batch = 8\nqueue_delay_us = 30000\npad = seq\n"
          "pad_value = ids:0\npad_value = mask:0\nworkers = 2\n")


@pytest.fixture(scope="module")
def cuda_server():
    if not FAKE or not os.path.exists(FAKE):
        pytest.skip("DVM_FAKE_CUDA (the stand-in driver, built by meson) is not set")
    root = tempfile.mkdtemp(prefix="dvm-serve-cuda-")
    model = os.path.join(root, "repo", "bert", "1", "model.dvmb")
    os.makedirs(os.path.dirname(model))
    r = subprocess.run([DVM, "compile", os.path.join(MODELS, "bert.onnx"), "-o", model, "--target", "cpu,cuda",
                        "--dim", "batch=1..8", "--dim", "seq=1..64"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no CUDA code generation here: {r.stderr.strip()}")
    with open(os.path.join(root, "repo", "bert", "config"), "w") as f:
        f.write(CONFIG)
    env = {"DVM_CUDA_DRIVER": FAKE, "DVM_CUBLAS": FAKE}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # for the server process only; restored at once
    try:
        s = Server(os.path.join(root, "repo"), os.path.join(root, "serve.log"))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    s.model = model
    yield s
    assert s.stop() == 0, s.log_text()[-3000:]


def cpu_reference(model, ids, mask, tmp):
    ip, mp, op = (os.path.join(tmp, n) for n in ("ids.npy", "mask.npy", "out.npy"))
    np.save(ip, ids)
    np.save(mp, mask)
    subprocess.run([DVM, "run", model, "--device", "cpu", "--input", f"ids={ip}", "--input", f"mask={mp}",
                    "--output", op, "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
    return np.load(op)


def test_cuda_model_batched_equals_cpu_run(cuda_server, tmp_path):
    rng = np.random.default_rng(16)
    cases = []
    for length in (3, 5, 6, 9, 12, 13, 30, 31):  # two buckets' worth, every residue mod 4
        ids, mask = sentence(rng, length)
        cases.append((ids, mask, cpu_reference(cuda_server.model, ids, mask, str(tmp_path))))
    client = httpclient.InferenceServerClient(cuda_server.url, concurrency=8)
    assert client.get_model_config("bert")["instance_group"][0]["kind"] == "KIND_GPU"

    def infer(case):
        ids, mask, _ = case
        inputs = []
        for name, x in (("ids", ids), ("mask", mask)):
            i = httpclient.InferInput(name, list(x.shape), np_to_triton_dtype(x.dtype))
            i.set_data_from_numpy(x, binary_data=True)
            inputs.append(i)
        return client.async_infer("bert", inputs)

    try:  # all in flight at once, so the batcher joins them
        got = [r.get_result().as_numpy("hidden") for r in [infer(c) for c in cases + cases]]
    finally:
        client.close()
    for (ids, _, want), g in zip(cases + cases, got, strict=True):
        assert g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    text = cuda_server.metrics()
    assert metric(text, "dvm_requests_total", model="bert", outcome="success") == 2 * len(cases)
    assert metric(text, "dvm_pool_bytes_peak", model="bert") > 0  # the pool of the model's device
    assert metric(text, "dvm_batch_size_count", model="bert") < 2 * len(cases)  # some were joined
