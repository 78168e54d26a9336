"""One real short training run at fixed G=16 and one at SAGC on the tiny world, in the
same invocation (run by hand, not a timed test). Prints the wall-clock ratio, each run's
rollout share of the step time and its padding efficiency, and checks that replaying the
G=16 run's ``lengths.jsonl`` through the simulator reproduces its straggler flags.

    OMP_NUM_THREADS=1 python benchmarks/tiny_training.py --cell CELL.json [--steps 8] \\
        [--out results/benchmarks/tiny_training]

``CELL.json`` is any tiny-world training cell the pipeline wrote (``python -m sagc.train
--config CELL.json`` accepts it: model, data and tokenizer paths already built); the
benchmark copies it twice, changing only the sizing, the step count and the output
folders. The two runs go through the trainer's CLI one after the other, on the same seed.

Every invocation starts clean: the trainer reuses a finished cell's ``done.json``, so
numbers from an old output folder would be read back as if just measured. The output
folder (by default ``results/benchmarks/tiny_training`` in the repository, which git
ignores) is emptied first if an earlier run of this benchmark made it, and refused if it
holds anything else; each run must then report that it trained every step from scratch.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import outdir  # benchmarks/outdir.py: this script's folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "results" / "benchmarks" / "tiny_training"
#: Written into the output folder: only a folder holding it is emptied on the next run.
MARKER = ".sagc-benchmark-tiny-training"


def _check_fresh(run_dir: Path, steps: int) -> None:
    """The run trained ``steps`` steps just now (not a reused or resumed result)."""
    done = json.loads((run_dir / "done.json").read_text())
    if done.get("resumed_from") is not None or done.get("steps") != steps:
        raise SystemExit(
            f"error: {run_dir} did not train {steps} steps from scratch "
            f"(steps {done.get('steps')}, resumed_from {done.get('resumed_from')})"
        )


def _cell(base: dict, sizing: str, steps: int, out: Path) -> dict:
    cell = copy.deepcopy(base)
    run_dir = out / sizing
    cell["output_dir"] = str(run_dir)
    cell.setdefault("cell", {})["sizing"] = sizing
    cell["cell"]["id"] = f"bench-{sizing}"
    cell.setdefault("sizing", {})["name"] = sizing
    cell.setdefault("train", {})["steps"] = steps
    cell.setdefault("wandb", {})["dir"] = str(run_dir / "wandb")
    cell["wandb"]["mode"] = "offline"
    cell.pop("resolved", None)  # another sizing and length than the pipeline resolved: resolved when loaded
    return cell


def _history(run_dir: Path):
    """The run's per-step history from its offline W&B files (sagc.aggregate's reader)."""
    try:
        from sagc.aggregate.reader import find_run_files, merge_segments, read_run_file

        return merge_segments([read_run_file(p) for p in find_run_files(run_dir)]).history
    except Exception as e:  # the reader is another part's: report, don't crash the numbers
        print(f"  (could not read the W&B history of {run_dir}: {e})")
        return None


def _padding_efficiency(trace_path: Path) -> float:
    from sagc.simulate import read_trace

    steps = read_trace(trace_path)
    used = sum(float(sum(g.sum() for g in s.lengths)) for s in steps)
    padded = sum(sum(g.size for g in s.lengths) * max(g.max() for g in s.lengths) for s in steps)
    return used / padded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cell", required=True, help="a tiny-world training cell (JSON)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="output folder, emptied first if this benchmark made it (default: %(default)s)",
    )
    args = ap.parse_args()
    base = json.loads(Path(args.cell).read_text())
    out = outdir.prepare_out(Path(args.out), MARKER, "benchmarks/tiny_training.py")
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_X_DISABLE_STATS": "true",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }

    wall = {}
    for sizing in ("g16", "sagc"):
        cfg_path = out / f"{sizing}.json"
        cfg_path.write_text(json.dumps(_cell(base, sizing, args.steps, out), indent=2))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sagc.train", "--config", str(cfg_path)], check=True, env=env)
        wall[sizing] = time.perf_counter() - t0
        _check_fresh(out / sizing, args.steps)
        print(f"{sizing}: {args.steps} steps in {wall[sizing]:.1f} s (process wall-clock)")

    print(f"wall-clock ratio g16 / sagc: {wall['g16'] / wall['sagc']:.2f}")
    from sagc import metrics as M

    for sizing in ("g16", "sagc"):
        run_dir = out / sizing
        hist = _history(run_dir)
        line = f"{sizing}:"
        if hist is not None and M.ROLLOUT_SECONDS in hist and M.STEP_SECONDS in hist:
            line += f" rollout share {hist[M.ROLLOUT_SECONDS].sum() / hist[M.STEP_SECONDS].sum():.3f}"
            line += f", training seconds {hist[M.STEP_SECONDS].sum():.1f}"
            line += f", straggler rate {hist[M.STRAGGLER].mean():.3f}, mean G {hist[M.GROUP_SIZE].mean():.2f}"
        trace = run_dir / "lengths.jsonl"
        if trace.is_file():
            line += f", padding efficiency {_padding_efficiency(trace):.3f} (token-weighted)"
        elif hist is not None and M.PADDING_EFFICIENCY in hist:
            line += f", padding efficiency {hist[M.PADDING_EFFICIENCY].mean():.3f} (mean per step)"
        print(line)

    # Replay check: the simulator, at the recorded G, must see the trainer's flags.
    trace, hist = out / "g16" / "lengths.jsonl", _history(out / "g16")
    if trace.is_file() and hist is not None and M.STRAGGLER in hist:
        from sagc.simulate import ReplayConfig, SimConfig, simulate

        sc = dict(base.get("sizing", {}).get("sagc", {}))
        sim = SimConfig.from_dict(
            {
                "source": "replay",
                "lengths": ReplayConfig(trace=str(trace)),
                "sizings": ["g16", "sagc"],
                "sagc": {k: v for k, v in sc.items() if k != "seed"},
            }
        )
        res = simulate(sim)
        recorded = hist[M.STRAGGLER].astype(bool).to_numpy()
        same = np.array_equal(res["g16"].straggler, recorded[: res["g16"].steps])
        print(
            f"replay of g16's trace: flags {'match' if same else 'DIFFER'}; simulated SAGC on it: "
            f"straggler {res['sagc'].straggler.mean():.3f}, "
            f"speed-up {res['g16'].step_s.sum() / res['sagc'].step_s.sum():.2f} (H200 assumptions)"
        )


if __name__ == "__main__":
    main()
