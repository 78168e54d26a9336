"""``python -m sagc.evaluate``: see ``sagc.evaluate.cli``."""

import sys

from sagc.evaluate.cli import main

sys.exit(main())
