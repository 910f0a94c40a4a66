import os
import sys

# ``python -m`` puts the directory it starts in first on the import path: removed before the
# command line imports anything more, so that ``python -m ldpsim`` imports from it no more than
# the ``ldpsim`` command does (a ``json.py`` among downloaded scenarios is never run)
if not sys.flags.safe_path and sys.path and sys.path[0] == os.getcwd():
    del sys.path[0]

from ldpsim.simulator.start import main  # noqa: E402

sys.exit(main())
