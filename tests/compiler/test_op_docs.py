"""docs/compiler.md's table of ops is `dvm compile --list-ops`, verbatim
between its markers: the docs are generated from the op table, not kept by
hand. To update them: python3 tests/compiler/test_op_docs.py --write."""
import os
import subprocess
import sys

DVM, DOCS = os.environ["DVM"], os.environ["DOCS"]
BEGIN, END = "<!-- dvm compile --list-ops -->\n", "<!-- end of --list-ops -->\n"
table = subprocess.run([DVM, "compile", "--list-ops"], capture_output=True, text=True, check=True).stdout
text = open(DOCS).read()
if BEGIN not in text or END not in text:
    sys.exit(f"{DOCS}: no {BEGIN.strip()} ... {END.strip()} section")
head, rest = text.split(BEGIN, 1)
body, tail = rest.split(END, 1)
if "--write" in sys.argv:
    open(DOCS, "w").write(head + BEGIN + table + END + tail)
elif body != table:
    sys.exit(f"{DOCS}: the op table differs from `dvm compile --list-ops`; run {sys.argv[0]} --write")
print("1 passed, 0 failed")
