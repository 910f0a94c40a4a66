"""``python -m ldpsim``: the command line."""

import sys

from ldpsim.simulator.start import main

sys.exit(main())
