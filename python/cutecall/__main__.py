"""``python -m cutecall``: the ``cutecall`` command (see ``cutecall.cli``)."""

import sys

from .cli import main

sys.exit(main())
