"""The first example of docs/python.md runs as written (from a directory
that has the repository's tests/ and examples/)."""
import os
import re
import subprocess
import sys

import dvm

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_docs_example_runs(tmp_path):
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        code = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    for d in ("tests", "examples"):
        os.symlink(os.path.join(ROOT, d), tmp_path / d)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)))  # this dvm
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "0.0"
