"""One colour and one position per sizing, the same in every figure and table.

Known names get fixed colours (fixed G from light to dark blues/greens, the controller in a
contrasting red), so ``g16`` looks the same in every figure of every grid. Any other name
(``g32``, ``sagc-tau3``, ...) gets a colour picked from a colour-blind-safe list by a stable
hash of the name (``zlib.crc32``, never ``hash()``, which changes between processes).
"""

from __future__ import annotations

import zlib

from sagc.aggregate.stats import fixed_group_size

KNOWN = {
    "g2": "#9ecae1",
    "g4": "#6baed6",
    "g8": "#3182bd",
    "g16": "#08519c",
    "g32": "#08306b",
    "sagc": "#d62728",
}

# Okabe-Ito + extras: distinguishable, none equal to a KNOWN colour.
_FALLBACK = (
    "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#f0e442", "#0072b2", "#d55e00",
    "#7f7f7f", "#8c564b", "#bcbd22", "#17becf", "#9467bd",
)  # fmt: skip

BASE_COLOUR = "#4d4d4d"


def sizing_colour(sizing: str) -> str:
    """The colour of ``sizing`` (fixed for known names, stable hash for the rest)."""
    if sizing in KNOWN:
        return KNOWN[sizing]
    return _FALLBACK[zlib.crc32(sizing.encode()) % len(_FALLBACK)]


def sizing_order(sizings) -> list[str]:
    """Fixed sizes by increasing G, then ``sagc``, then other controllers alphabetically."""
    unique = list(dict.fromkeys(sizings))
    fixed = sorted((s for s in unique if fixed_group_size(s) is not None), key=fixed_group_size)
    other = sorted((s for s in unique if fixed_group_size(s) is None), key=lambda s: (s != "sagc", s))
    return fixed + other


def palette(sizings) -> dict[str, str]:
    """Sizing -> colour for seaborn's ``palette=`` (ordered like ``sizing_order``)."""
    return {s: sizing_colour(s) for s in sizing_order(sizings)}
