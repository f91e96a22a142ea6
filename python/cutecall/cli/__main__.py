"""``python -m cutecall.cli``: the ``cutecall`` command."""

import sys

from . import main

sys.exit(main())
