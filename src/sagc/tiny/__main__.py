"""``python -m sagc.tiny``: see ``sagc.tiny.cli``."""

import sys

from sagc.tiny.cli import main

sys.exit(main())
