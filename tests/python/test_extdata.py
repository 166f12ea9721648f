"""Weights in the model's external data files, referenced by the .dvmb
(docs/bytecode.md 3.9): compiled by `dvm compile`, loaded with dvm.load,
checked against ONNX Runtime, and refused or kept safe when the file is
wrong or changes."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from dvmtest.cli import compile_onnx, dvm_ok
from dvmtest.onnxmodel import make_model
from onnx import TensorProto as T
from onnx import helper as h

import dvm

ort = pytest.importorskip("onnxruntime")


def weights(rng):
    # bytes multiples of 64, so that onnx.save lays each at a 64-byte
    # aligned offset and every one is referenced
    return {"w1": rng.standard_normal((37, 64)).astype(np.float32),
            "b1": rng.standard_normal(64).astype(np.float32),
            "w2": rng.standard_normal((64, 131)).astype(np.float32),
            "emb": rng.standard_normal((97, 16)).astype(np.float32)}


def mlp_gather(w):
    """y = relu(x @ w1 + b1) @ w2 (packed weights); e = emb[ids] (read plain)."""
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h0"]), h.make_node("Add", ["h0", "b1"], ["h1"]),
             h.make_node("Relu", ["h1"], ["h2"]), h.make_node("MatMul", ["h2", "w2"], ["y"]),
             h.make_node("Gather", ["emb", "ids"], ["e"])]
    return make_model(nodes, [("x", T.FLOAT, ["n", 37]), ("ids", T.INT64, ["n", 5])],
                      [("y", T.FLOAT, None), ("e", T.FLOAT, None)],
                      [h.make_tensor(k, T.FLOAT, v.shape, v.tobytes(), raw=True) for k, v in w.items()])


def compile_cli(src, out, *flags):
    compile_onnx(src, "--dim", "n=0..4096", *flags, out=out)
    return out


def references(path):
    p = dvm_ok("disasm", path)
    return [line.split()[1] for line in p.stdout.splitlines() if line.startswith(".const") and ' file "' in line]


@pytest.fixture
def extdata_folder(tmp_path):
    """model.onnx + model.onnx.data as onnx.save writes them, compiled beside them."""
    w = weights(np.random.default_rng(7))
    onnx.save(mlp_gather(w), str(tmp_path / "model.onnx"), save_as_external_data=True,
              location="model.onnx.data", size_threshold=0)
    compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb")
    return tmp_path


def feeds(rng, n):
    return {"x": rng.standard_normal((n, 37)).astype(np.float32), "ids": rng.integers(-97, 97, (n, 5))}


def test_referenced_not_copied_and_same_answers_as_onnxruntime(extdata_folder):
    data = (extdata_folder / "model.onnx.data").stat().st_size
    assert sorted(references(extdata_folder / "model.dvmb")) == ["b1", "emb", "w1", "w2"]
    assert (extdata_folder / "model.dvmb").stat().st_size < data // 4
    ref = ort.InferenceSession(str(extdata_folder / "model.onnx"), providers=["CPUExecutionProvider"])
    m, rng = dvm.load(extdata_folder / "model.dvmb"), np.random.default_rng(1)
    for n in (0, 1, 2, 17, 257):
        f = feeds(rng, n)
        y, e = ref.run(None, f)
        out = m.run(f)
        np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(out["e"], e)


def test_embed_data_flag_and_output_elsewhere_copy_the_weights(extdata_folder, tmp_path_factory):
    data = (extdata_folder / "model.onnx.data").stat().st_size
    embedded = compile_cli(extdata_folder / "model.onnx", extdata_folder / "embedded.dvmb", "--embed-data")
    other = compile_cli(extdata_folder / "model.onnx", tmp_path_factory.mktemp("elsewhere") / "m.dvmb")
    f = feeds(np.random.default_rng(2), 3)
    want = dvm.load(extdata_folder / "model.dvmb").run(f)
    os.remove(extdata_folder / "model.onnx.data")
    for path in (embedded, other):  # outside the data's folder: copied, runs without it
        assert references(path) == [] and path.stat().st_size > data
        out = dvm.load(path).run(f)
        np.testing.assert_array_equal(out["y"], want["y"])
        np.testing.assert_array_equal(out["e"], want["e"])


LOAD_RSS = """
import os, sys, dvm
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
m = dvm.load(sys.argv[1])
print(rss() - before, m._sizes()["released_bytes"])
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
def test_packed_weights_held_once_a_gathered_table_left_in_its_file(tmp_path):
    """A MatMul weight is held only as its packed form (its pages of the
    mapping given back), a Gather's table not at all (rows read from the
    file when asked, vm/filemap.c), the bias as a copy: a load costs about
    the weights once, the table aside."""
    rng = np.random.default_rng(6)
    w = {"w1": rng.standard_normal((1024, 2048)).astype(np.float32),  # 8 MiB, packed
         "b1": rng.standard_normal(2048).astype(np.float32),
         "w2": rng.standard_normal((2048, 64)).astype(np.float32),
         "emb": rng.standard_normal((4096, 256)).astype(np.float32)}  # 4 MiB, left in the file
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h0"]), h.make_node("Add", ["h0", "b1"], ["h1"]),
             h.make_node("MatMul", ["h1", "w2"], ["y"]), h.make_node("Gather", ["emb", "ids"], ["e"])]
    mp = make_model(nodes, [("x", T.FLOAT, ["n", 1024]), ("ids", T.INT64, ["n"])], [("y", T.FLOAT, None), ("e", T.FLOAT, None)],
                    [h.make_tensor(k, T.FLOAT, v.shape, v.tobytes(), raw=True) for k, v in w.items()])
    onnx.save(mp, str(tmp_path / "model.onnx"), save_as_external_data=True, location="d.bin", size_threshold=0)
    path = compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb")
    # in a fresh process, where no freed memory is at hand to reuse
    p = subprocess.run([sys.executable, "-c", LOAD_RSS, str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    grown, released = map(int, p.stdout.split())
    total = sum(v.nbytes for v in w.values()) - w["emb"].nbytes
    assert released >= w["w1"].nbytes - 8192
    assert total * 0.9 < grown < total * 1.35, (grown, total)  # the table too would be 1.5, a copy of w1 1.9
    m = dvm.load(path)
    x, ids = rng.standard_normal((4, 1024)).astype(np.float32), np.array([0, 4095, -1, 17])
    out = m.run({"x": x, "ids": ids})
    np.testing.assert_allclose(out["y"], (x.astype(np.float64) @ w["w1"] + w["b1"]) @ w["w2"], rtol=1e-3, atol=1e-2)
    np.testing.assert_array_equal(out["e"], w["emb"][ids])


LOAD_PEAK = """
import sys, dvm
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))
before = status("VmRSS")
m = dvm.load(sys.argv[1])
print(status("VmHWM") - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_packing_a_weight_gives_its_rows_back_as_it_goes(tmp_path):
    """A module with its weights inside (a cached or --embed-data one) is
    read into memory whole; packing a MatMul weight gives its plain rows
    back block by block while its form grows (ops/cpu/pgemm.c), so the
    load's peak is about the weights once, not the largest one twice."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((1031, 8192)).astype(np.float32)  # 33 MiB; a prime count of rows
    mp = make_model([h.make_node("MatMul", ["x", "w"], ["y"])], [("x", T.FLOAT, ["n", 1031])], [("y", T.FLOAT, None)],
                    [onnx.numpy_helper.from_array(w, "w")])
    onnx.save(mp, str(tmp_path / "model.onnx"))
    path = compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb", "--embed-data")
    # without meson's MALLOC_PERTURB_, which fills (so touches) every page malloc hands out
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    p = subprocess.run([sys.executable, "-c", LOAD_PEAK, str(path)], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.returncode == 0, p.stderr
    peak = int(p.stdout)
    if not os.environ.get("DVM_SANITIZED"):  # ASan's allocator and shadow pages have RSS of their own
        assert w.nbytes * 0.9 < peak < w.nbytes * 1.3, (peak, w.nbytes)  # plain and form at once: 2x
    x = rng.standard_normal((5, 1031)).astype(np.float32)
    np.testing.assert_allclose(dvm.load(path).run({"x": x})["y"], x.astype(np.float64) @ w, rtol=1e-3, atol=1e-2)


def test_referenced_weights_settle_one_at_a_time(tmp_path):
    """Weights referenced in their file are packed from its mapping, and
    each is checked and its pages given back as soon as its form is made,
    not after the last: the load's peak is about the weights once (all
    plain pages held until the end would be twice)."""
    rng = np.random.default_rng(9)
    ws = [rng.standard_normal((1024, 2048)).astype(np.float32) for _ in range(4)]  # 4 x 8 MiB
    nodes = [h.make_node("MatMul", ["x" if i == 0 else f"h{i}", f"w{i}"], [f"h{i + 1}" if i < 3 else "y"]) for i in range(4)]
    mp = make_model(nodes, [("x", T.FLOAT, ["n", 1024])], [("y", T.FLOAT, None)],
                    [onnx.numpy_helper.from_array(w if i % 2 == 0 else w.T.copy(), f"w{i}") for i, w in enumerate(ws)])
    onnx.save(mp, str(tmp_path / "model.onnx"), save_as_external_data=True, location="d.bin", size_threshold=0)
    path = compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    p = subprocess.run([sys.executable, "-c", LOAD_PEAK, str(path)], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.returncode == 0, p.stderr
    peak, total = int(p.stdout), sum(w.nbytes for w in ws)
    if not os.environ.get("DVM_SANITIZED"):
        assert total * 0.9 < peak < total * 1.4, (peak, total)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
def test_nbits_weights_held_once_as_their_packed_form(tmp_path):
    """MatMulNBits' codes, scales and zero points from an external file
    are held only as the forms its tiles read (their pages of the mapping
    given back): an int4 model costs about its weights once."""
    rng = np.random.default_rng(8)
    k, n, block = 4096, 2048, 32
    kb = k // block
    w = {"b": rng.integers(0, 256, (n, kb, block // 2), dtype=np.uint8),  # 4 MiB
         "scales": rng.uniform(0.01, 0.1, n * kb).astype(np.float32),  # 1 MiB
         "zp": rng.integers(0, 256, (n, kb // 2), dtype=np.uint8)}
    node = h.make_node("MatMulNBits", ["x", "b", "scales", "zp"], ["y"], domain="com.microsoft",
                       K=k, N=n, bits=4, block_size=block)
    mp = make_model([node], [("x", T.FLOAT, ["n", k])], [("y", T.FLOAT, None)],
                    [onnx.numpy_helper.from_array(v, name) for name, v in w.items()])
    mp.opset_import.append(h.make_opsetid("com.microsoft", 1))
    onnx.save(mp, str(tmp_path / "model.onnx"), save_as_external_data=True, location="d.bin", size_threshold=0)
    path = compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb")
    assert sorted(references(path)) == ["b", "scales", "zp"]
    p = subprocess.run([sys.executable, "-c", LOAD_RSS, str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    grown, released = map(int, p.stdout.split())
    total = sum(v.nbytes for v in w.values())
    assert released >= w["b"].nbytes - 8192
    # the forms are 1.2x the plain bytes (zero points as floats), on 2 MiB
    # pages where the kernel gives them huge pages (ops/cpu/weight_mem.c), so
    # RSS may round them up to the next 2 MiB; with a copy too, 2.2x
    huge = 2 << 20
    forms = -(-int(total * 1.2) // huge) * huge
    assert total * 0.9 < grown < forms + (1 << 20) < total * 2.2, (grown, total, forms)
    ref = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    m = dvm.load(path)
    for rows in (1, 5):
        x = rng.standard_normal((rows, k)).astype(np.float32)
        np.testing.assert_allclose(m.run({"x": x})["y"], ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-3)


def test_compiled_for_a_data_dir_and_kept_elsewhere(extdata_folder, tmp_path_factory):
    """compile(data_dir=) refers to the data files of that folder though the
    .dvmb lies elsewhere (as a cache keeps it): loaded with the same
    data_dir, from a file or from memory, it gives the answers of the one
    beside the data; without it, the files are not found."""
    elsewhere = tmp_path_factory.mktemp("cache") / "m.dvmb"
    m = dvm.compile(extdata_folder / "model.onnx", dims={"n": (0, 4096)}, data_dir=extdata_folder)
    m.save(elsewhere)
    assert elsewhere.stat().st_size < (extdata_folder / "model.onnx.data").stat().st_size // 4  # referred to
    f = feeds(np.random.default_rng(5), 7)
    want = dvm.load(extdata_folder / "model.dvmb").run(f)
    for got in (dvm.Module(elsewhere, data_dir=extdata_folder).run(f),
                dvm.Module(elsewhere.read_bytes(), data_dir=str(extdata_folder)).run(f)):
        np.testing.assert_array_equal(got["y"], want["y"])
        np.testing.assert_array_equal(got["e"], want["e"])
    with pytest.raises(dvm.Error, match=r'constant "w1": external file .*model.onnx.data: No such file'):
        dvm.Module(elsewhere)


def test_a_changed_file_is_refused_naming_file_and_constant(extdata_folder):
    data = extdata_folder / "model.onnx.data"
    raw = bytearray(data.read_bytes())
    off = (37 * 64 + 64 + 64 * 131) * 4 + 5  # inside emb
    raw[off] ^= 1
    data.write_bytes(raw)
    with pytest.raises(dvm.Error, match=r'constant "emb": bytes \d+\.\.\d+ of "model.onnx.data" have XXH3-64 '
                                        r'[0-9a-f]{16}, the module expects') as e:
        dvm.load(extdata_folder / "model.dvmb")
    assert e.value.code == "CORRUPT"


def test_a_short_or_missing_file_is_refused(extdata_folder):
    data = extdata_folder / "model.onnx.data"
    size = data.stat().st_size
    os.truncate(data, size - 4)
    with pytest.raises(dvm.Error, match=r'constant "emb": bytes \d+\.\.%d of "model.onnx.data" lie past its end '
                                        r'\(%d bytes\)' % (size, size - 4)):
        dvm.load(extdata_folder / "model.dvmb")
    os.remove(data)
    with pytest.raises(dvm.Error, match=r'constant "w1": external file .*model.onnx.data: No such file'):
        dvm.load(extdata_folder / "model.dvmb")


def test_loaded_from_memory_says_where_the_weights_are(extdata_folder):
    with pytest.raises(dvm.Error, match=r'constant "w1" is in the file "model.onnx.data", but the module was '
                                        r'loaded from memory'):
        dvm.Module((extdata_folder / "model.dvmb").read_bytes())


def test_a_file_changed_after_load_does_not_change_answers(extdata_folder):
    """Written in place while loaded: the packed forms and the plain copies
    are the module's own memory; the Gather table's rows are read from the
    file, each block checked, so a run is an error naming the file, never
    other numbers; cut short, an error too, not SIGBUS."""
    m, f = dvm.load(extdata_folder / "model.dvmb"), feeds(np.random.default_rng(4), 9)
    m.run(f)
    data = extdata_folder / "model.onnx.data"
    size = data.stat().st_size
    with open(data, "r+b") as fh:
        fh.write(b"\x7f" * size)
    with pytest.raises(dvm.Error, match=r'gather: bytes \d+\.\.\d+ of "model.onnx.data" changed after the module was '
                                        r'loaded') as e:
        m.run(f)
    assert e.value.code == "CORRUPT"
    os.truncate(data, 64)
    with pytest.raises(dvm.Error, match=r'reading "model.onnx.data" at byte \d+: the file is shorter than at load'):
        m.run(f)
    with pytest.raises(dvm.Error, match="lie past its end|changed after compiling"):
        dvm.load(extdata_folder / "model.dvmb")


def test_an_unaligned_offset_is_copied(tmp_path):
    """An offset the loader could not use in place (not a multiple of 64) is
    written into the .dvmb."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=w.shape, data_location=T.EXTERNAL)
    for k, v in (("location", "w.bin"), ("offset", "4"), ("length", str(w.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    (tmp_path / "w.bin").write_bytes(b"\0" * 4 + w.tobytes())
    mp = make_model([h.make_node("MatMul", ["x", "w"], ["y"])], [("x", T.FLOAT, ["n", 3])], [("y", T.FLOAT, None)], [t])
    onnx.save(mp, str(tmp_path / "model.onnx"))
    path = compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb")
    assert references(path) == []
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(dvm.load(path).run({"x": x})["y"], x @ w)


def test_conv_weights_are_copied_since_conv_packs_them_lazily(tmp_path):
    """A convolution makes its weight's oneDNN forms on first use, from the
    plain bytes: those come from the module's own copy, never the file."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    mp = make_model([h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                    [("x", T.FLOAT, ["n", 3, 13, 11])], [("y", T.FLOAT, None)],
                    [h.make_tensor("w", T.FLOAT, w.shape, w.tobytes(), raw=True)])
    onnx.save(mp, str(tmp_path / "model.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    path = compile_cli(tmp_path / "model.onnx", tmp_path / "model.dvmb")
    assert references(path) == ["w"]
    ref = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((2, 3, 13, 11)).astype(np.float32)
    want = ref.run(None, {"x": x})[0]
    m = dvm.load(path)
    (tmp_path / "w.bin").write_bytes(np.zeros_like(w).tobytes())  # before the first run
    np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
