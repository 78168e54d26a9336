"""``python -m sagc.train --config CELL.json``: train one grid cell (see sagc.train.run)."""

import sys

from sagc.train.run import main

if __name__ == "__main__":
    sys.exit(main())
