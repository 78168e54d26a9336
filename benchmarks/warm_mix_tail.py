"""The length table of a warm-start mix, before any model is built.

    python benchmarks/warm_mix_tail.py results/default/data [--warm-check-frac 0.10 ...]

Draws groups of 8 SFT targets per training problem from the warm start's behaviour mix
(``sagc.tiny.warmstart.draw_behaviour``, any ``--warm-*`` flag of ``python -m sagc.tiny
base-model``; lessons left out: their start is context, which the model does not learn to
produce), counts their tokens with the world's tokenizer (+ eos) and prints the table a
straggler report prints (``sagc.lengths.tail_table``) beside the real run's. A base model
imitates its mix, so this predicts its table in seconds instead of a warm start's minutes:
the default config's mix reads sd of log length 0.40 and 7.4 % over 2.5x the median where
its two built bases measured 0.38-0.41 and 5.5-6.5 % (docs/history/2026-12-03-body-spread-probe.md).
It cannot predict what RL keeps.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from pathlib import Path

from sagc.lengths import REAL_RUN_TAIL, tail_table
from sagc.tiny.task import Problem, load_split
from sagc.tiny.tokenizer import load_tokenizer
from sagc.tiny.warmstart import WarmStartParams, draw_behaviour


def mix_table(
    data: Path, params: WarmStartParams, seed: int = 0, group: int = 8, tokenizer: Path | None = None
) -> dict:
    """The tail table of ``group`` draws from the mix for every training problem."""
    tok = load_tokenizer(tokenizer or data / "tokenizer")
    rng = random.Random(seed)
    groups = []
    for row in load_split(data, "train"):
        problem = Problem.from_prompt(row["prompt"])
        texts = [draw_behaviour(problem, rng, params)[0] for _ in range(group)]
        groups.append([len(ids) + 1 for ids in tok(texts, add_special_tokens=False)["input_ids"]])
    return tail_table(groups)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a built tiny world's data folder (results/<name>/data)")
    parser.add_argument("--tokenizer", type=Path, help="default: DATA/tokenizer")
    parser.add_argument("--seed", type=int, default=0)
    for f in dataclasses.fields(WarmStartParams):
        parser.add_argument(f"--warm-{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    ns = parser.parse_args(argv)
    params = WarmStartParams(**{f.name: getattr(ns, f"warm_{f.name}") for f in dataclasses.fields(WarmStartParams)})
    table = mix_table(ns.data, params.validate(), ns.seed, tokenizer=ns.tokenizer)
    print(f"{'statistic':<24} {'this mix':>9} {'real run':>9}")
    for key, real in REAL_RUN_TAIL.items():
        print(f"{key:<24} {table[key]:>9.3f} {real:>9.3f}")


if __name__ == "__main__":
    main()
