"""The real pipeline end to end through vLLM's CPU build: the ci grid (configs/ci.yaml) with
the overlay configs/ci-vllm.yaml, so every training cell generates with TRL's colocated
vLLM engine and every evaluation runs lm-eval's vLLM backend; then the tables. Skipped
where vLLM is not installed (requirements/cpu-vllm.txt)."""

import json

import pandas as pd
import pytest

from tests.pipeline.test_e2e import REPO, checkout, snakemake  # noqa: F401 - checkout: a fixture

pytest.importorskip("vllm")
pytestmark = [pytest.mark.slow, pytest.mark.vllm]

# The trainer's line when its rollouts come from vLLM.
VLLM_ENGINE_LINE = "rollouts: vLLM, colocate engine"


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory, checkout):  # noqa: F811
    work = tmp_path_factory.mktemp("space") / "vllm run"
    work.mkdir()
    configs = [work / "ci.yaml", work / "ci-vllm.yaml"]
    for path in configs:
        path.write_text((REPO / "configs" / path.name).read_text())
    rc, out = snakemake(
        checkout, work, "--cores", "2", "--configfile", *map(str, configs), env={"VLLM_CPU_KVCACHE_SPACE": "1"}
    )  # GiB
    if rc != 0:
        logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted((work / "results").rglob("*.log")))
        pytest.fail(f"pipeline failed:\n{out[-6000:]}\n{logs}")
    return work / "results" / "ci-vllm"


def test_every_training_cell_generates_through_vllm(vllm_run):
    for sizing in ("g4", "sagc"):
        cell = vllm_run / "train" / "tiny-llama" / "grpo" / sizing / "seed0"
        assert json.loads((cell / "cell.json").read_text())["device"]["use_vllm"] is True
        assert VLLM_ENGINE_LINE in (cell / "train.log").read_text()
        done = json.loads((cell / "done.json").read_text())
        assert done["steps"] == 4
        # one vLLM generate call of P x G rows per step, G the controller's (or the fixed) one
        for h in done["history"]:
            assert [c["rows"] for c in h["calls"]] == [2 * h["group_size"]]
    fixed = json.loads((vllm_run / "train/tiny-llama/grpo/g4/seed0/done.json").read_text())
    assert set(fixed["group_sizes"]) == {4}


def test_every_evaluation_runs_lm_eval_vllm_backend(vllm_run):
    evals = [vllm_run / "eval" / "tiny-llama" / "base"] + [
        vllm_run / "eval" / "tiny-llama" / "grpo" / s / "seed0" for s in ("g4", "sagc")
    ]
    for ev in evals:
        info = json.loads((ev / "run_info.json").read_text())
        assert info["backend"] == "vllm" and "max_model_len=256" in info["model_args"]
        summary = json.loads((ev / "summary.json").read_text())
        assert set(summary["tasks"]) == {"tiny_arith", "tiny_arith_heldout"}
        rows = [json.loads(line) for line in (ev / "output_lengths.jsonl").read_text().splitlines()]
        assert len(rows) == sum(t["n_samples"] for t in summary["tasks"].values())
        assert all(0 < r["n_tokens"] <= 64 for r in rows)  # vLLM's counts, capped at max_gen_toks


def test_the_tables_come_from_the_vllm_cells(vllm_run):
    eff = pd.read_csv(vllm_run / "tables" / "efficiency.csv")
    assert set(eff["sizing"]) == {"g4", "sagc"}
    assert json.loads((vllm_run / "tables" / "missing.json").read_text()) == {}
