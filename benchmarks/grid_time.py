"""Where a grid's time went: per stage and per job, from Snakemake's benchmark files.

    python benchmarks/grid_time.py results/default [--jobs 10]

Every rule writes ``results/<name>/benchmarks/<rule>/...tsv`` (Snakemake's ``benchmark:``:
wall seconds ``s`` and ``cpu_time`` of the job's processes; a job forked from the warm
interpreter, ``sagc.warm``, runs outside them, so its ``cpu_time`` is its client's only).
For training jobs the cell's
``done.json`` adds the seconds spent in training steps (``wallclock_s``), so a train job
splits into training and the rest (imports, model load, W&B, saving). Printed: job-seconds
per stage (the sum over jobs: divide by the cores for a lower bound on the grid's wall time),
the mean per job, and the slowest jobs.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

STAGES = {"tiny_data": "world", "tiny_tokenizer": "world", "tiny_base_model": "world",
          "tiny_stragglers": "world", "train": "train", "evaluate_cell": "evaluate",
          "evaluate_base": "evaluate", "aggregate": "aggregate", "simulate": "aggregate"}  # fmt: skip


def read_jobs(results: Path) -> list[dict]:
    """One dict per benchmark file: rule, job (path below the rule), s, cpu_time,
    training_s (train jobs: seconds inside training steps, from done.json)."""
    jobs = []
    root = results / "benchmarks"
    for tsv in sorted(root.rglob("*.tsv")):
        rel = tsv.relative_to(root).with_suffix("")
        rule = rel.parts[0]
        with tsv.open() as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        job = {"rule": rule, "job": "/".join(rel.parts[1:]) or rule, "s": float(row["s"]),
               "cpu_time": float(row["cpu_time"]), "training_s": None}  # fmt: skip
        if rule == "train":
            done = results / "train" / Path(*rel.parts[1:]) / "done.json"
            if done.is_file():
                job["training_s"] = float(json.loads(done.read_text())["wallclock_s"])
        jobs.append(job)
    if not jobs:
        raise SystemExit(f"no benchmark files under {root} (run the grid first)")
    return jobs


def report(jobs: list[dict], top: int) -> str:
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for j in jobs:
        by_rule[j["rule"]].append(j)
    lines = [f"{'stage':<10} {'rule':<16} {'jobs':>5} {'job-s':>8} {'mean s':>7} {'cpu s':>8}"]
    stage_totals: dict[str, float] = defaultdict(float)
    for rule, js in sorted(by_rule.items(), key=lambda kv: list(STAGES).index(kv[0]) if kv[0] in STAGES else 99):
        total = sum(j["s"] for j in js)
        stage_totals[STAGES.get(rule, "other")] += total
        lines.append(f"{STAGES.get(rule, 'other'):<10} {rule:<16} {len(js):>5} {total:>8.0f} "
                     f"{total / len(js):>7.1f} {sum(j['cpu_time'] for j in js):>8.0f}")  # fmt: skip
    train = [j for j in by_rule.get("train", []) if j["training_s"] is not None]
    if train:
        trained = sum(j["training_s"] for j in train)
        whole = sum(j["s"] for j in train)
        lines.append(
            f"\ntrain jobs: {whole:.0f} job-s, of which {trained:.0f} s in training steps and "
            f"{whole - trained:.0f} s outside them ({(whole - trained) / len(train):.1f} s a job: "
            "imports, model load, W&B, saving)"
        )
    total = sum(stage_totals.values())
    lines.append(
        "\nper stage (job-s): "
        + ", ".join(f"{k} {v:.0f}" for k, v in stage_totals.items())
        + f"; all {total:.0f} job-s = {total / 2 / 60:.1f} min on 2 cores if perfectly packed"
    )
    lines.append(f"\nslowest {top} jobs:")
    for j in sorted(jobs, key=lambda j: -j["s"])[:top]:
        lines.append(f"  {j['s']:7.1f} s  {j['rule']}/{j['job']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results/<name> of a finished grid")
    parser.add_argument("--jobs", type=int, default=8, help="how many of the slowest jobs to list")
    ns = parser.parse_args(argv)
    print(report(read_jobs(ns.results), ns.jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
