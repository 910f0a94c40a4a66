"""``python -m simulator`` (from a checkout): the command line, as ``python -m ldpsim``."""

import runpy

# ldpsim/__main__.py removes the start directory from the import path before importing more
runpy.run_module("ldpsim", run_name="__main__", alter_sys=True)
