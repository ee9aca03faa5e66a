"""JavaScript's Math.round, which seed 000's reconciliation uses.

Python's round() is banker's rounding (round(2.5) == 2); Math.round rounds
half toward +infinity (Math.round(2.5) == 3, Math.round(-2.5) == -2).
"""

from __future__ import annotations

import math


def js_round(x: float) -> int:
    floor = math.floor(x)
    return int(floor + 1 if x - floor >= 0.5 else floor)
