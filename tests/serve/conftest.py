"""Fixtures for the dvm serve tests: a model repository in a temporary
folder, a running `dvm serve` on a free 127.0.0.1 port, and `dvm run` as
the reference for results."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from dvmtest.paths import DVM, MODELS, ROOT

# Model configs (docs/serving.md): bert batches and pads by length bucket;
# slow waits long in its queue (for cancellation, timeouts, queue limits);
# tight has a pool too small for long sequences; mlp is an .onnx compiled
# at load; bad is a truncated .dvmb; plain has no config (no batching);
# prio has one worker and a long queue delay (request priorities).
CONFIGS = {
    "bert": "batch = batch\nmax_batch = 8\nqueue_delay_us = 20000\npad = seq\n"
            "pad_value = ids:0\npad_value = mask:0\nworkers = 2\n",
    "slow": "batch = batch\nmax_batch = 64\nqueue_delay_us = 600000\nmax_queue = 3\n",
    "tight": "pool_limit = 30000\n",
    "prio": "batch = batch\nmax_batch = 2\nqueue_delay_us = 400000\nworkers = 1\n",
    "mlp": "batch = batch\ndim = batch=1..64\nmax_batch = 4\n",
}


# x * x, whose signature leaves x's dim 1 open (`?`): requests batch on
# dim 0 only with equal widths (dvm asm text).
OPEN_DIM = """.kernel mul cpu 1
.shapefn broadcast

.func main regs=5
  .sym batch r4 1 64
  .param x tensor f32 [batch, ?]
  .result y tensor f32 [batch, ?]
  guard          r0, 0
  shapefn        broadcast, (r1), (r0, r0)
  alloc          r2, f32, r1, cpu
  invoke         mul, -, (r2), (r0, r0), ()
  ret            (r2)
.end
"""

def build_repo(root):
    bert = os.path.join(root, "bert.dvmb")
    subprocess.run([DVM, "compile", os.path.join(MODELS, "bert.onnx"), "-o", bert,
                    "--dim", "batch=1..64", "--dim", "seq=1..64"], check=True)
    for name in ("bert", "slow", "tight", "plain", "prio"):
        os.makedirs(os.path.join(root, "repo", name, "1"))
        shutil.copy(bert, os.path.join(root, "repo", name, "1", "model.dvmb"))
    os.makedirs(os.path.join(root, "repo", "bert", "2"))
    shutil.copy(bert, os.path.join(root, "repo", "bert", "2", "model.dvmb"))
    os.makedirs(os.path.join(root, "repo", "mlp", "1"))
    shutil.copy(os.path.join(MODELS, "mlp.onnx"), os.path.join(root, "repo", "mlp", "1", "model.onnx"))
    os.makedirs(os.path.join(root, "repo", "bad", "1"))
    with open(bert, "rb") as f, open(os.path.join(root, "repo", "bad", "1", "model.dvmb"), "wb") as g:
        g.write(f.read()[:300])
    for name, text in CONFIGS.items():
        with open(os.path.join(root, "repo", name, "config"), "w") as f:
            f.write(text)
    return os.path.join(root, "repo")


class Server:
    def __init__(self, repo, log_path, *extra, exe=DVM):
        self.log_path = log_path
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen([exe, "serve", repo, "--http-port", "0", "--threads", "2", *extra],
                                     stderr=self.log, stdout=subprocess.DEVNULL)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None:
            text = self.log_text()
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
            if self.port and "models loaded" in text:
                break
            time.sleep(0.05)
        assert self.port, "dvm serve did not start:\n" + self.log_text()
        self.url = f"127.0.0.1:{self.port}"

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.url}/metrics") as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def repo(tmp_path_factory):
    return build_repo(str(tmp_path_factory.mktemp("serve")))


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    s = Server(repo, str(tmp_path_factory.mktemp("log") / "serve.log"), "--max-elements", "2048")
    yield s
    rc = s.stop()
    assert rc == 0, s.log_text()[-3000:]


@pytest.fixture(scope="module")
def client(server):
    """tritonclient's HTTP client on the module's server."""
    import tritonclient.http as httpclient
    c = httpclient.InferenceServerClient(server.url, concurrency=16)
    yield c
    c.close()


def metric(text, name, **labels):
    """The value of one sample in Prometheus text."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{" + want + "}") or (not labels and line.startswith(name + " ")):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(f"{name}{{{want}}}")


_refs = {}


def reference(repo, ids, mask):
    """hidden for (ids, mask) from `dvm run` on the same .dvmb."""
    key = (ids.tobytes(), ids.shape, mask.tobytes())
    if key in _refs:
        return _refs[key]
    tmp = os.path.join(os.path.dirname(repo), "refs")
    os.makedirs(tmp, exist_ok=True)
    ip, mp, op = (os.path.join(tmp, n) for n in ("ids.npy", "mask.npy", "out.npy"))
    np.save(ip, ids)
    np.save(mp, mask)
    subprocess.run([DVM, "run", os.path.join(repo, "bert", "1", "model.dvmb"), "--input", f"ids={ip}",
                    "--input", f"mask={mp}", "--output", op, "--threads", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    _refs[key] = np.load(op)
    return _refs[key]


def sentence(rng, length, batch=1):
    ids = rng.integers(1, 100, size=(batch, length), dtype=np.int64)
    return ids, np.ones_like(ids)
