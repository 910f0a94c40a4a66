"""``python -m ldpsim``: the command line."""

import sys

from ldpsim.simulator.cli import main

sys.exit(main())
