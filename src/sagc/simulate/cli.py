"""Command line of the simulator.

The four commands and the files they write: docs/controller.md ("The simulator study").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sagc.simulate import prompt_world as pw
from sagc.simulate.calibrate import calibrate
from sagc.simulate.config import SimConfig, load_config
from sagc.simulate.engine import simulate, summary_table
from sagc.simulate.report import write_figures, write_tables
from sagc.simulate.suite import WORLDS, SuiteConfig, run_suite, write_suite
from sagc.simulate.sweep import best_settings, run_sweep


def _run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    if args.seed is not None:
        cfg = cfg.replace(seed=args.seed)
    t0 = time.perf_counter()
    rows = summary_table(simulate(cfg))
    sweep_rows = run_sweep(cfg)
    best = best_settings(sweep_rows)
    meta = {"config": cfg.to_dict(), "sweep_best": best, "simulation_seconds": time.perf_counter() - t0}
    write_tables(args.out_table, rows, sweep_rows, meta)
    write_figures(args.out_figures, rows, sweep_rows, title=cfg.name)
    for r in rows:
        extra = " ".join(f"{k}={v:.2f}" for k, v in r.items() if k.startswith("speedup_vs_"))
        print(
            f"{r['sizing']:>8}: straggler {100 * r['straggler_rate']:5.1f}%  {r['total_hours']:7.2f} h  "
            f"mean G {r['mean_group_size']:5.2f}  padding eff {r['padding_efficiency']:.3f}  {extra}"
        )
    f, ref, b = best["fastest"], best["reference"], best["best_within_budget"]
    print(f"sweep fastest: tau={f['tau']} delta={f['delta']}" + (f" ({ref}={f[ref]:.2f})" if ref else ""))
    within = (
        f"tau={b['tau']} delta={b['delta']} rate={b['straggler_rate']:.3f} mean G={b['mean_group_size']:.2f}"
        if b
        else "none met its budget"
    )
    print(f"sweep best within budget: {within}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    import yaml

    base = load_config(args.config) if args.config else SimConfig()
    result = calibrate(base)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "calibrated.yaml").write_text(yaml.safe_dump(result["calibrated_config"], sort_keys=False))
    b = result["best"]
    print(
        f"best params {b['params']}: straggler G16 {b['straggler_rate_g16']:.3f} (paper 0.996), "
        f"SAGC {b['straggler_rate_sagc']:.3f} (paper 0.434), speed-up {b['speedup']:.2f} (paper 1.84)"
    )
    for name, r in result["at_paper_scale"].items():
        print(
            f"  at {result['steps_for_paper_hours']} steps: {name}: {r['total_hours']:.1f} h, "
            f"straggler {100 * r['straggler_rate']:.1f}%"
        )
    return 0


def _suite(args: argparse.Namespace) -> int:
    suite = SuiteConfig(steps=tuple(args.steps), seeds=args.seeds, prompts=args.prompts,
                        worlds=tuple(args.worlds or WORLDS), traces=tuple(args.trace or ()))  # fmt: skip
    t0 = time.perf_counter()
    rows, summary = run_suite(suite)
    return _report(rows, write_suite(args.out, rows, summary, suite), t0)


def _prompt(args: argparse.Namespace) -> int:
    suites = [pw.hetero_suite(seeds=args.seeds, steps=args.steps, prompt_sigma=sigma, tail_coupling=args.tail_coupling,
                              long_fraction=args.long_fraction) for sigma in args.prompt_sigma]  # fmt: skip
    # A replayed tiny-world trace keeps its run's 2 prompts per step.
    suites += [pw.replay_suite(t, seeds=args.seeds, steps=args.steps, long_fraction=args.long_fraction, prompts=2,
                               name=f"replay:{'/'.join(Path(t).parts[-4:-1])}") for t in args.trace or ()]  # fmt: skip
    t0 = time.perf_counter()
    rows, notes = [], []
    for suite in suites:
        part, _ = pw.run(suite)
        rows += part
        for best in ("sagc", "sagc-fast"):
            m, ci = pw.paired_ratio(part, "sagc-prompt-fast", best)
            notes.append(
                f"- {suite.name}: decode speed-up of sagc-prompt-fast / {best}: {m:.3f} ± {ci:.3f} (paired by seed)"
            )
    return _report(rows, pw.write(args.out, rows, pw.summarize(rows), "\n".join(notes) + "\n"), t0)


def _report(rows: list, paths: list[Path], t0: float) -> int:
    """Print the written table and what was written."""
    print(paths[-1].read_text(), end="")
    print(f"{len(rows)} runs in {time.perf_counter() - t0:.1f} s; wrote {', '.join(str(p) for p in paths)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagc.simulate", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate every sizing of a config, sweep tau x delta, write table + figures")
    run.add_argument("--config", required=True, help="simulator config (YAML or JSON)")
    run.add_argument("--out-table", required=True, help="folder for summary.csv, summary.json, sweep.csv")
    run.add_argument("--out-figures", required=True, help="folder for sim_sizing.* and sim_sweep.*")
    run.add_argument("--seed", type=int, help="override the config's seed")
    cal = sub.add_parser("calibrate", help="fit the length model to the paper's headline")
    cal.add_argument("--config", help="base config (default: built-in defaults)")
    cal.add_argument("--out", required=True, help="folder for calibration.json and calibrated.yaml")
    suite = sub.add_parser("suite", help="controller variants over a suite of length worlds (mean, 95%% CI over seeds)")
    suite.add_argument("--out", required=True, help="folder for runs.csv, suite.csv and suite.md")
    suite.add_argument("--steps", type=int, nargs="+", default=[16, 64], help="run lengths (default: 16 64)")
    suite.add_argument("--seeds", type=int, default=200, help="seeds per world and run length (default: 200)")
    suite.add_argument("--prompts", type=int, default=4, help="prompts per step (default: 4, the tiny world's)")
    suite.add_argument("--worlds", nargs="+", help="parametric worlds (default: all)")
    suite.add_argument("--trace", action="append", help="a lengths.jsonl to replay as one more world (repeatable)")
    prompt = sub.add_parser(
        "prompt", help="prompt-aware control (tail batching, sagc-prompt) in prompt-heterogeneous worlds"
    )
    prompt.add_argument("--out", required=True, help="folder for runs.csv, prompt.csv and prompt.md")
    prompt.add_argument("--steps", type=int, default=128, help="steps per run (default: 128, 8 epochs of 64 prompts)")
    prompt.add_argument("--seeds", type=int, default=100, help="seeds per world (default: 100)")
    prompt.add_argument(
        "--prompt-sigma",
        type=float,
        nargs="*",
        default=[0.5],
        help="sd of prompt log-scales, one world each (none: replays only)",
    )
    prompt.add_argument(
        "--tail-coupling", type=float, default=1.0, help="how much long prompts run away more often (default: 1)"
    )
    prompt.add_argument("--long-fraction", type=float, default=0.25, help="share of prompts deferred to long rounds")
    prompt.add_argument(
        "--trace", action="append", help="a lengths.jsonl with prompt ids to replay, 2 prompts a step (repeatable)"
    )
    args = parser.parse_args(argv)
    commands = {"run": _run, "calibrate": _calibrate, "suite": _suite, "prompt": _prompt}
    try:
        return commands[args.command](args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
