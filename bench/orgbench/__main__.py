"""``python -m mempp.bench.orgbench``."""

import sys

from . import main

sys.exit(main())
