import zlib

from sagc.pipeline.grid import Cell, Grid, base_seed


def grid():
    return Grid("default", ("tiny-qwen2", "tiny-llama"), ("grpo", "dapo"), ("g4", "g8", "g16", "sagc"), (0, 1))


def test_cells_enumerate_the_product():
    cells = list(grid().cells())
    assert len(cells) == len(grid()) == 2 * 2 * 4 * 2
    assert len({c.id for c in cells}) == len(cells)
    assert cells[0].id == "tiny-qwen2/grpo/g4/seed0"


def test_seeds_are_stable_hashes_shared_by_the_sizings_of_a_pair():
    cell = Cell("tiny-qwen2", "grpo", "sagc", 1)
    assert cell.train_seed == zlib.crc32(b"tiny-qwen2/grpo/seed1") & 0x7FFFFFFF
    # Paired: every sizing of one model/algorithm/seed sees the same prompt stream.
    assert {Cell("tiny-qwen2", "grpo", s, 1).train_seed for s in ("g4", "g16", "sagc", "sagc-fast")} == {
        cell.train_seed
    }
    pairs = {(c.model, c.algorithm, c.seed): c.train_seed for c in grid().cells()}
    assert len(set(pairs.values())) == len(pairs), "seeds, algorithms and models get their own streams"


def test_base_seeds_keep_earlier_worlds_and_differ_per_draw():
    # draw 0 is the seed every earlier world was built with, so their bases (and the sha1s
    # docs/replication.md records) stay what they were
    assert base_seed("tiny-qwen2", 0) == zlib.crc32(b"tiny-qwen2/base/base/seed0") & 0x7FFFFFFF
    seeds = {base_seed(m, w, d) for m in ("tiny-qwen2", "tiny-llama") for w in (0, 1) for d in (0, 1, 2)}
    assert len(seeds) == 2 * 2 * 3, "each model, world seed and draw is its own base"


def test_layout():
    g, c = grid(), Cell("tiny-llama", "dapo", "g16", 1)
    assert g.train_dir(c) == "results/default/train/tiny-llama/dapo/g16/seed1"
    assert g.eval_dir(c) == "results/default/eval/tiny-llama/dapo/g16/seed1"
    assert g.base_eval_dir("tiny-llama") == "results/default/eval/tiny-llama/base"
    assert g.tables_dir == "results/default/tables"
    assert g.figures_dir == "paper_figures/default"


def test_cli_flags_are_stable_under_key_order():
    from sagc.pipeline.cells import cli_flags

    a = cli_flags({"n_train": 400, "fast": True, "skip": False, "sizes": [2, 8], "none": None})
    b = cli_flags({"sizes": [2, 8], "none": None, "skip": False, "fast": True, "n_train": 400})
    assert a == b == "--fast --n-train 400 --sizes 2 8"


def test_cli_flags_quote_values_for_the_shell():
    import shlex

    from sagc.pipeline.cells import cli_flags

    flags = cli_flags({"model": "results/my run/base", "tasks": "a,b", "sizes": ["x y", 8]})
    assert shlex.split(flags) == ["--model", "results/my run/base", "--sizes", "x y", "8", "--tasks", "a,b"]
    assert cli_flags({"n_train": 400}) == "--n-train 400"  # plain values unchanged: no params change
