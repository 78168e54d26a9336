"""One colour and one position per sizing, the same in every figure and table (docs/aggregation.md, "Figures")."""

from __future__ import annotations

import zlib

from sagc.controller import fixed_group_size

KNOWN = {
    "g2": "#cc79a7",  # reddish purple
    "g4": "#e69f00",  # orange
    "g8": "#009e73",  # bluish green
    "g16": "#0072b2",  # blue
    "g32": "#6a3d9a",  # purple
    "sagc": "#d62728",  # red: the controller stands out
}

# Every other name: saturated (drawn as thin lines too), distinct from each other and from KNOWN.
_FALLBACK = (
    "#8c564b", "#17becf", "#bcbd22", "#e377c2", "#1a1a1a", "#56b4e9", "#a6761d", "#66a61e",
)  # fmt: skip

BASE_COLOUR = "#7f7f7f"


def sizing_order(sizings) -> list[str]:
    """Fixed sizes by increasing G, then ``sagc``, then other controllers alphabetically."""
    unique = list(dict.fromkeys(sizings))
    fixed = sorted((s for s in unique if fixed_group_size(s) is not None), key=fixed_group_size)
    other = sorted((s for s in unique if fixed_group_size(s) is None), key=lambda s: (s != "sagc", s))
    return fixed + other


def palette(sizings) -> dict[str, str]:
    """Sizing -> colour (ordered like ``sizing_order``), distinct while the fallback list lasts."""
    order = sizing_order(sizings)
    colours = {s: KNOWN[s] for s in order if s in KNOWN}
    taken = set(colours.values())
    for s in order:
        if s in colours:
            continue
        start = zlib.crc32(s.encode()) % len(_FALLBACK)
        free = [_FALLBACK[(start + i) % len(_FALLBACK)] for i in range(len(_FALLBACK))]
        colour = next((c for c in free if c not in taken), free[0])
        colours[s] = colour
        taken.add(colour)
    return {s: colours[s] for s in order}
