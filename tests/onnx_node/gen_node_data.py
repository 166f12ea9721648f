"""Writes every node test case of the installed `onnx` package
(`onnx.backend.test.case.node.collect_testcases(None)`, about 1,880 with onnx
1.23) as model + inputs + outputs, and runs ONNX Runtime on each one to record
which it passes. setup.sh calls it; the result is generated, never committed.

Layout of OUT (default tests/onnx_node/data, git-ignored):

    OUT/<test>/model.onnx
    OUT/<test>/test_data_set_0/input_N.pb  (+ input_N.npy for NumPy dtypes)
    OUT/<test>/test_data_set_0/output_N.pb (+ output_N.npy for NumPy dtypes)
    OUT/index.tsv   test, op_type, opset, ops, expanded, rtol, atol, ort, ort_message
    OUT/stamp       onnx and onnxruntime versions, a hash of this script and ops_subset.txt
    OUT/ops_subset/ links to the tests of ops_subset.txt, with their index.tsv:
                    the cases tests/ops/ checks single kernels against

`op_type` is the op the case tests (for an `_expanded` case, the op whose
function body it is); `ort` is pass or fail under compare() of
run_node_tests.py, ONNX Runtime on the CPU with one thread. The data is
written again only when the stamp changes (or with --force).

usage: gen_node_data.py [--out DIR] [--force]
"""
import argparse
import hashlib
import os
import shutil
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
sys.path.insert(0, HERE)
from run_node_tests import compare, tolerances  # noqa: E402


def stamp_text():
    import onnx
    import onnxruntime
    digest = hashlib.sha256()
    for path in (os.path.abspath(__file__), os.path.join(HERE, "ops_subset.txt")):
        with open(path, "rb") as f:
            digest.update(f.read())
    return f"onnx {onnx.__version__}\nonnxruntime {onnxruntime.__version__}\ngen {digest.hexdigest()[:16]}\n"


def as_proto(value, vi):
    """value as the ONNX message its graph input or output `vi` declares."""
    from onnx import TensorProto, numpy_helper
    t = vi.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, vi.name)
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, vi.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, vi.name)
    if isinstance(value, TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), vi.name)


def native(value):
    """value as a NumPy array of a NumPy dtype (strings as str), or None
    (sequences, maps, optionals, bfloat16, float8, 4-bit types)."""
    from onnx import TensorProto, numpy_helper
    if isinstance(value, TensorProto):
        value = numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray) or type(value.dtype).__module__.startswith("ml_dtypes"):
        return None
    if value.dtype.kind in "OSU":
        return np.vectorize(lambda x: x.decode() if isinstance(x, bytes) else str(x), otypes=[str])(value) \
            if value.size else value.astype(str)
    return value if value.dtype.kind in "biufc" else None


def ort_feed(value):
    from onnx import TensorProto, numpy_helper
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value) if isinstance(value, np.generic) else value


def ort_check(model, inputs, outputs, rtol, atol):
    """'' when ONNX Runtime reproduces the outputs, else why not."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        got = sess.run(None, {n: ort_feed(x) for n, x in zip(names, inputs)})
    except Exception as e:  # any refusal or error of ORT's: it does not pass
        return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    if len(got) != len(outputs):
        return f"{len(got)} outputs, expected {len(outputs)}"
    for i, (g, w) in enumerate(zip(got, outputs)):
        why = compare_any(g, ort_feed(w), rtol, atol)
        if why:
            return f"output {i}: {why}"
    return ""


def compare_any(got, want, rtol, atol):
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return "sequence length differs"
        for g, w in zip(got, want):
            why = compare_any(g, w, rtol, atol)
            if why:
                return why
        return None
    if want is None:
        return None if got is None else "expected an empty optional"
    if isinstance(want, dict):
        return None if got == want else "map differs"
    return compare(np.asarray(got), np.asarray(want), rtol, atol)


def op_of(name, ops_by_test):
    """The op a case tests: its own, or for test_x_expanded[_verN] test_x's."""
    if name in ops_by_test:
        return ops_by_test[name]
    base = name.split("_expanded")[0]
    return ops_by_test.get(base, "?")


def write_ops_subset(out, rows):
    with open(os.path.join(HERE, "ops_subset.txt")) as f:
        names = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    have = {r[0]: r for r in rows}
    lacking = [n for n in names if n not in have]
    if lacking:
        sys.exit(f"gen_node_data: the installed onnx lacks node tests of ops_subset.txt: {' '.join(lacking)}")
    sub = os.path.join(out, "ops_subset")
    os.makedirs(sub)
    with open(os.path.join(sub, "index.tsv"), "w") as f:
        f.write("test\top_type\topset\tops\texpanded\trtol\tatol\tort\tort_message\n")
        for n in names:
            os.symlink(os.path.join("..", n), os.path.join(sub, n))
            f.write("\t".join(have[n]) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    stamp = stamp_text()
    stamp_path = os.path.join(args.out, "stamp")
    if not args.force and os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        print(f"gen_node_data: {args.out} is up to date")
        return 0

    import onnx
    import onnx.backend.test.case.node as node_cases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.random.seed(0)
        cases = node_cases.collect_testcases(None)
    ops_by_test = {n: nd.op_type for n, nd in node_cases._existing_names.items()}

    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rows, ort_pass = [], 0
    for case in sorted(cases, key=lambda c: c.name):
        model = case.model
        inputs, outputs = case.data_sets[0]
        d = os.path.join(tmp, case.name, "test_data_set_0")
        os.makedirs(d)
        onnx.save(model, os.path.join(tmp, case.name, "model.onnx"))
        for kind, values, infos in (("input", inputs, model.graph.input), ("output", outputs, model.graph.output)):
            for j, (value, vi) in enumerate(zip(values, infos)):
                with open(os.path.join(d, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(as_proto(value, vi).SerializeToString())
                arr = native(value)
                if arr is not None:
                    np.save(os.path.join(d, f"{kind}_{j}.npy"), arr)
        rtol, atol = tolerances(case.rtol, case.atol)
        why = ort_check(model, inputs, outputs, rtol, atol)
        ort_pass += not why
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        ops = sorted({n.op_type for n in model.graph.node})
        rows.append([case.name, op_of(case.name, ops_by_test), str(opset), ",".join(ops),
                     "1" if "_expanded" in case.name else "0", repr(rtol), repr(atol),
                     "fail" if why else "pass", why.replace("\t", " ").replace("\n", " ")])
    with open(os.path.join(tmp, "index.tsv"), "w") as f:
        f.write("test\top_type\topset\tops\texpanded\trtol\tatol\tort\tort_message\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    write_ops_subset(tmp, rows)
    with open(os.path.join(tmp, "stamp"), "w") as f:
        f.write(stamp)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(f"gen_node_data: wrote {len(rows)} node tests of onnx {onnx.__version__} to {args.out}; "
          f"ONNX Runtime passes {ort_pass}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
