"""The QuACK/FA4 corpus these tests check lives beside them, in
``tests/external/corpus`` (out of the wheel; ``bench/external`` times the
same cases): it is importable as ``corpus`` in any pytest import mode."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
