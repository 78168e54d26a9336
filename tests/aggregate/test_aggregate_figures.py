"""Figures are written, non-empty, deterministic, and colour each sizing the same way."""

from __future__ import annotations

import matplotlib
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pytest
import seaborn as sns
from matplotlib.colors import to_hex

from sagc.aggregate.api import aggregate
from sagc.aggregate.collect import collect
from sagc.aggregate.figures import (
    _RC,
    FIGURE_NAMES,
    FIGURES,
    save,
    length_ratio_figure,
    posterior_figure,
    reward_vs_time_figure,
    straggler_rate_figure,
)
from sagc.aggregate.grid import parse_grid
from sagc.aggregate.outputs import figure_files, figure_outputs
from sagc.aggregate.palette import KNOWN, palette, sizing_colour, sizing_order


def test_backend_is_agg():
    import sagc.aggregate.figures  # noqa: F401

    assert matplotlib.get_backend().lower() == "agg"


def test_all_figures_written_non_empty_and_deterministic(world_copy):
    root, grid = world_copy
    g = parse_grid(grid, root=root)
    result = aggregate(g)
    out = root / "paper_figures/t"
    assert sorted(p.name for p in out.iterdir()) == sorted(figure_files())
    assert [str(p) for p in result.figures] == figure_outputs(out)
    first = {}
    for name in FIGURE_NAMES:
        png, pdf = out / f"{name}.png", out / f"{name}.pdf"
        img = mpimg.imread(png)
        assert img.shape[0] > 200 and img.shape[1] > 400, name
        assert img[..., :3].std() > 0.05, f"{name}.png looks blank"
        assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 5_000, name
        first[name] = (png.read_bytes(), pdf.read_bytes())
    assert len(result.figures) == 2 * len(FIGURE_NAMES)
    # Same data, same bytes (no timestamps): redraw two of them into another folder.
    again = root / "again"
    with sns.axes_style("whitegrid"), plt.rc_context(_RC):
        for name in ("straggler_rate", "reward_vs_time"):
            png, pdf = save(FIGURES[name](result.collected), again, name)
            assert png.read_bytes() == first[name][0], name
            assert pdf.read_bytes() == first[name][1], name


def test_sizing_colours_are_consistent_across_figures(synthetic_world):
    root, grid = synthetic_world
    collected = collect(parse_grid(grid, root=root))
    fig = straggler_rate_figure(collected)
    bars = {to_hex(p.get_facecolor()) for p in fig.axes[0].patches if p.get_height() > 0}
    assert bars == {KNOWN["g4"], KNOWN["g16"], KNOWN["sagc"]}
    plt.close(fig)
    for draw in (reward_vs_time_figure, length_ratio_figure):
        fig = draw(collected)
        colours = {to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
        assert {KNOWN["g4"], KNOWN["g16"], KNOWN["sagc"]} <= colours, draw.__name__
        plt.close(fig)
    fig = posterior_figure(collected)  # candidate G drawn in its fixed sizing's colour
    colours = {to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
    assert {KNOWN["g4"], KNOWN["g8"], KNOWN["g16"]} <= colours
    plt.close(fig)


def test_palette_order_and_fallback():
    assert sizing_order(["sagc", "g16", "sagc-tau3", "g4", "g32", "g8"]) == [
        "g4", "g8", "g16", "g32", "sagc", "sagc-tau3"
    ]
    pal = palette(["sagc-tau3", "g4"])
    assert list(pal) == ["g4", "sagc-tau3"]
    # Unknown names: stable across calls (crc32, not hash()) and distinct from known ones.
    assert sizing_colour("sagc-tau3") == sizing_colour("sagc-tau3")
    assert sizing_colour("sagc-tau3") not in KNOWN.values()
    assert sizing_colour("g64") != sizing_colour("sagc-prompt")


def test_grid_without_controller_still_writes_every_figure(world_copy):
    root, grid = world_copy
    grid["cells"] = [c for c in grid["cells"] if c["sizing"] != "sagc"]
    result = aggregate(parse_grid(grid, root=root))
    names = {p.name for p in result.figures}
    assert {"sagc_group_size.png", "sagc_posterior.pdf"} <= names
    assert all(p.stat().st_size > 0 for p in result.figures)
    assert "no controller" in (root / "results/t/tables/headline.md").read_text()


@pytest.mark.parametrize("unit", ["s", "h"])
def test_time_unit_reaches_tables(world_copy, unit):
    root, grid = world_copy
    grid["time_unit"] = unit
    aggregate(parse_grid(grid, root=root), figures=False)
    md = (root / "results/t/tables/efficiency.md").read_text()
    assert f"Wall-clock ({unit})" in md
    expected = {"s": "126.00 ± 8.49", "h": "0.04 ± 0.00"}[unit]  # g16: 120 s and 132 s
    g16 = next(line for line in md.splitlines() if "| g16 |" in line)
    assert f"| {expected} |" in g16
