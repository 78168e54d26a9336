import sys

from sagc.simulate.cli import main

sys.exit(main())
