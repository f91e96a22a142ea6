"""Tests of the product ``cutecall.quack`` (QuACK's kernels in JAX, per
target arch). A test that compares with the structure of QuACK's own
compile arguments reads ``corpus.authors`` from ``tests/external``."""

import os
import sys

EXTERNAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "external")
if os.path.abspath(EXTERNAL) not in sys.path:
    sys.path.append(os.path.abspath(EXTERNAL))
