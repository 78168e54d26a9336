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
    length_ratio_figure,
    posterior_figure,
    reward_vs_time_figure,
    save,
    straggler_rate_figure,
)
from sagc.aggregate.grid import parse_grid
from sagc.aggregate.outputs import figure_files, figure_outputs
from sagc.aggregate.palette import KNOWN, palette, sizing_order


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
    # Same data, same bytes (no timestamps): redraw every figure the aggregation wrote
    # (one per name of sagc.aggregate.outputs, the Snakemake outputs) into another folder.
    written = {p.stem for p in out.iterdir()}
    assert written == set(FIGURE_NAMES) == set(FIGURES)
    again = root / "again"
    with sns.axes_style("whitegrid"), plt.rc_context(_RC):
        for name in sorted(written):
            png, pdf = save(FIGURES[name](result.collected), again, name)
            assert png.read_bytes() == first[name][0], name
            assert pdf.read_bytes() == first[name][1], name
    assert sorted(p.name for p in again.iterdir()) == sorted(figure_files())


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
        "g4",
        "g8",
        "g16",
        "g32",
        "sagc",
        "sagc-tau3",
    ]
    pal = palette(["sagc-tau3", "g4"])
    assert list(pal) == ["g4", "sagc-tau3"]
    # Unknown names: stable across calls (crc32, not hash()) and distinct from known ones.
    assert palette(["sagc-tau3"]) == palette(["sagc-tau3"])
    assert palette(["sagc-tau3"])["sagc-tau3"] not in KNOWN.values()
    assert palette(["g64"])["g64"] != palette(["sagc-prompt"])["sagc-prompt"]


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


# ---------------------------------------------------------------- figures for publication
# On a grid of 2 models x 2 algorithms x {g4, g8, g16, sagc, sagc-fast} x 3 seeds
# (tests/aggregate/figure_grid.py): what the paper grid is about to become.

import colorsys  # noqa: E402

import numpy as np  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from sagc.aggregate.figures import accuracy_vs_length_figure, group_size_figure  # noqa: E402
from tests.aggregate.figure_grid import DELTA, SIZINGS, figure_collected  # noqa: E402


@pytest.fixture(scope="module")
def big():
    return figure_collected()


def _draw(draw, collected):
    with sns.axes_style("whitegrid"), plt.rc_context(_RC):
        fig = draw(collected)
        fig.canvas.draw()
    return fig


def _legend_labels(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_straggler_rate_plot_marks_each_controllers_budget_delta(big):
    fig = _draw(straggler_rate_figure, big)
    ax = fig.axes[0]
    dashed = {
        round(line.get_ydata()[0], 6): to_hex(line.get_color())
        for line in ax.get_lines()
        if line.get_linestyle() == "--"
    }
    pal = palette(SIZINGS)
    assert dashed == {DELTA["sagc"] * 100: pal["sagc"], DELTA["sagc-fast"] * 100: pal["sagc-fast"]}
    assert {"δ = 0.3 (sagc)", "δ = 0.5 (sagc-fast)"} <= set(_legend_labels(fig))
    plt.close(fig)


def test_one_shared_delta_is_one_black_line():
    one = figure_collected(sizings=("g4", "g16", "sagc"))
    fig = _draw(straggler_rate_figure, one)
    dashed = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_ydata()[0] == 30.0 and to_hex(dashed[0].get_color()) == "#000000"
    assert "δ = 0.3" in _legend_labels(fig)
    plt.close(fig)


def test_group_size_is_on_a_log2_axis_shared_by_every_panel(big):
    fig = _draw(group_size_figure, big)
    g_row = [ax for ax in fig.axes if ax.get_title()]  # the top row carries the panel titles
    assert len(g_row) == 4
    for ax in g_row:
        assert ax.get_yscale() == "log" and ax.yaxis.get_transform().base == 2
        assert ax.get_ylim() == g_row[0].get_ylim()
        assert list(ax.get_yticks()) == [4, 8, 16]
    assert [t.get_text() for t in g_row[0].get_yticklabels()] == ["4", "8", "16"]
    y4, y8, y16 = (g_row[0].transData.transform((0, g))[1] for g in (4, 8, 16))
    assert y8 - y4 == pytest.approx(y16 - y8, rel=1e-6)
    plt.close(fig)


@pytest.mark.parametrize("seeds, bands", [((0, 1, 2), True), ((0,), False)])
def test_reward_vs_time_is_smoothed_with_bands_over_seeds(seeds, bands):
    collected = figure_collected(seeds=seeds)
    fig = _draw(reward_vs_time_figure, collected)
    ax = fig.axes[0]
    fills = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(fills) == (len(SIZINGS) if bands else 0)
    assert len(ax.get_lines()) == len(SIZINGS)  # one curve per sizing, not one per seed
    assert "step mean" in ax.get_ylabel()
    plt.close(fig)


def _hue(colour: str) -> float:
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hsv(r, g, b)[0] * 360


def test_fixed_sizes_and_the_controller_differ_in_hue_not_just_shade():
    names = ["g2", "g4", "g8", "g16", "g32", "sagc"]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            d = abs(_hue(KNOWN[a]) - _hue(KNOWN[b]))
            assert min(d, 360 - d) >= 30, (a, b, KNOWN[a], KNOWN[b])


def test_every_sizing_of_a_grid_gets_its_own_colour():
    names = ["g4", "g8", "g16", "g32", "sagc"] + [f"sagc-v{i}" for i in range(7)]
    pal = palette(names)
    assert len(set(pal.values())) == len(names)
    assert palette(["sagc-fast", "g4"])["sagc-fast"] == palette(["sagc-fast"])["sagc-fast"]


def test_accuracy_vs_length_has_error_bars_and_no_point_hidden_under_another(big):
    fig = _draw(accuracy_vs_length_figure, big)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 4
    for ax in panels:
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        # 5 sizings + base, 2 tasks each
        assert len(bars) == 12, ax.get_title()
        assert all(c.has_yerr for c in bars)
        centres = np.array([c.lines[0].get_transform().transform(c.lines[0].get_xydata())[0] for c in bars])
        pts = centres * 72.0 / fig.dpi
        gaps = [np.hypot(*(pts[i] - pts[j])) for i in range(len(pts)) for j in range(i + 1, len(pts))]
        assert min(gaps) >= 4.0, f"{ax.get_title()}: two points within {min(gaps):.1f} pt"
    plt.close(fig)


@pytest.mark.parametrize("seeds", [(0,), (0, 1, 2, 3)])
def test_every_figure_takes_any_number_of_seeds_and_controller_variants(seeds):
    sizings = ("g4", "g16", "sagc", "sagc-fast", "sagc-tight", "sagc-wide")
    collected = figure_collected(seeds=seeds, sizings=sizings)
    for name, draw in FIGURES.items():
        fig = _draw(draw, collected)
        labels = _legend_labels(fig)
        shown = [s for s in sizings if s in labels]
        expected = [s for s in sizings if name not in ("sagc_group_size",) or not s.startswith("g")]
        if name != "sagc_posterior":  # the posterior figure's legend is the candidate G
            assert shown == expected, name
        plt.close(fig)
