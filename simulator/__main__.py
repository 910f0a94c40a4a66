import sys

from ldpsim.simulator.start import main

sys.exit(main())
