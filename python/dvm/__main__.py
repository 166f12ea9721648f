"""python -m dvm compile|run|inspect: the dvm command line, from Python."""
import sys

from ._cli import main

sys.exit(main())
