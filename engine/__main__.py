"""``python -m mempp``: the ``mempp`` command (:func:`mempp.cli.main`) run as a module.

Owns nothing but that entry point; every command lives in ``cli``.

Never imports: store, planner, mempp.bench.
"""

import sys

from .cli import main

sys.exit(main())
