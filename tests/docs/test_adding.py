"""The file counts docs/ gives for adding an op, a pass or an instruction
hold in the tree. Each such count is a row of a table headed `| adding |
names searched | source files it touches | also named by (they use it) |
files |`, with a real example of its kind (docs/compiler.md, Adding an
op). The source files that name one of the example's names (whole names:
`mish` is found in `dvm_mish` but not in `mishap`), in code rather than in
comments, must be the files the row lists plus the ones it says only use
the example, and the count must be the number of files listed. A new
place where every op (pass, instruction) must be added names the example
too, so the test fails until the docs count it."""
import functools
import os
import re
import subprocess

import pytest

ROOT = os.environ.get("DVM_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DIRS = ("compiler", "vm", "ops", "shapefuncs", "serve", "gen", "tools", "python")
SOURCE = re.compile(r"\.(c|h|def|proto|py|pyi)$|(^|/)meson\.build$")
HEADER = ["adding", "names searched", "source files it touches", "also named by (they use it)", "files"]
C_COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|("(?:\\.|[^"\\\n])*")', re.S)


def code(path):
    """The file's text without its comments (strings kept: kernel and pass
    names are strings)."""
    with open(os.path.join(ROOT, path), errors="replace") as f:
        text = f.read()
    if path.endswith((".py", ".pyi", "meson.build")):
        return re.sub(r"#[^\n]*", "", text)
    return C_COMMENT.sub(lambda m: m.group(1) or " ", text)


@functools.cache
def sources():
    r = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("not a git checkout: " + r.stderr.strip())
    files = [f for f in r.stdout.split() if SOURCE.search(f) and (f.split("/")[0] in DIRS or f == "meson.build")]
    return {f: code(f) for f in files}


def ticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def rows():
    """(doc, line, kind, names, files, users, count) for each counted row."""
    found = []
    docs = os.path.join(ROOT, "docs")
    for doc in sorted(os.listdir(docs)):
        if not doc.endswith(".md"):
            continue
        in_table = False
        for no, line in enumerate(open(os.path.join(docs, doc)), 1):
            cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
            if cells == HEADER:
                in_table = True
            elif not cells:
                in_table = False
            elif in_table and not set(cells[0]) <= set("- "):
                assert len(cells) == len(HEADER), f"docs/{doc}:{no}: {len(cells)} cells, want {len(HEADER)}"
                kind, names, files, users, count = cells
                found.append((doc, no, kind, ticked(names), ticked(files), ticked(users), count))
    return found


ROWS = rows()


def test_every_kind_is_counted():
    kinds = {kind for _, _, kind, *_ in ROWS}
    want = {"an elementwise op of an existing kernel family", "a float unary math op", "an op with its own shape rule",
            "an op that is more than one kernel call", "a rewrite pass", "an instruction", "a device"}
    assert want <= kinds, f"docs/ no longer counts {sorted(want - kinds)}"


@pytest.mark.parametrize("doc,no,kind,names,files,users,count", ROWS, ids=[r[2] for r in ROWS])
def test_count_holds(doc, no, kind, names, files, users, count):
    where = f"docs/{doc}:{no} ({kind})"
    assert names and files, f"{where}: a row needs names to search and the files it touches"
    assert count.isdigit() and int(count) == len(files), f"{where}: says {count} files but lists {len(files)}"
    words = re.compile("|".join(r"(?<![A-Za-z0-9])%s(?![A-Za-z0-9])" % re.escape(n) for n in names))
    naming = {f for f, text in sources().items() if words.search(text)}
    unlisted = sorted(naming - set(files) - set(users))
    missing = sorted((set(files) | set(users)) - naming)
    assert not unlisted, (f"{where}: {unlisted} also name {names}: where that is a new place to add each one "
                          "of this kind to, count it in the row; where it only uses the example, list it as a user")
    assert not missing, f"{where}: {missing} do not name {names}"
