"""The sagc_prompt block: registry, pipeline config, cell config; bad values name the key."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from sagc.controller import FixedGroupSize, parse_sizing
from sagc.pipeline import config as pipeline_config
from sagc.pipeline.cells import sizing_section
from sagc.prompt_aware.config import PromptSAGCConfig
from sagc.prompt_aware.policy import PromptAwareSAGC
from sagc.train.config import SizingSection

REPO = Path(__file__).resolve().parents[2]
#: The prompt-aware grid: an overlay on the embedded default.
PROMPT_GRID = (REPO / "configs/default.yaml", REPO / "configs/prompt.yaml")


def test_sizing_names_build_the_hybrid_and_tail_batching_alone():
    hybrid = parse_sizing("sagc-prompt").build({"tau": 2.5}, seed=3)
    assert isinstance(hybrid, PromptAwareSAGC) and hybrid.config.seed == 3 and hybrid.config.tau == 2.5
    assert hybrid.long.config.seed == 4
    alone = parse_sizing("sagc-prompt-g16")
    assert alone.policy.name == "sagc-prompt" and alone.variant == "g16"
    sizer = alone.build({"tau": 2.5, "group_size": 16})
    assert isinstance(sizer, FixedGroupSize) and sizer.group_size == 16
    assert alone.group_sizes({"group_size": 16}) == (16,)
    assert parse_sizing("sagc-fast").policy.name == "sagc"  # the longer name does not capture it


def test_prompt_config_cells_carry_the_merged_block():
    cfg = pipeline_config.load_config(*PROMPT_GRID)
    section = sizing_section(cfg, "sagc-prompt-fast")
    block = section["sagc_prompt"]
    assert block["tau"] == cfg["sagc"]["tau"] and block["long_fraction"] == 0.25
    assert block["counterfactual"] is True and block["selection"] == "constrained"
    assert sizing_section(cfg, "sagc-prompt-g16")["sagc_prompt"]["group_size"] == 16
    assert SizingSection.from_dict(section).policy_config(seed=1).sagc.counterfactual


@pytest.mark.parametrize("key, value", [("long_fraction", 0.0), ("queue_rounds", 0), ("hash_dim", -1), ("edge_tokens", 1.5),
                                        ("group_size", 1), ("quantile", 0.2), ("history_decay", 2.0)])
def test_bad_values_name_the_key_in_the_pipeline_config(key, value):
    cfg = pipeline_config.load_config(*PROMPT_GRID)
    bad = copy.deepcopy(cfg)
    bad["sagc_prompt"][key] = value
    with pytest.raises(Exception, match=f"sagc_prompt.{key}"):
        pipeline_config.check_semantics(bad, "configs/prompt.yaml")


def test_bad_values_name_the_key_in_a_cell_config():
    with pytest.raises(ValueError, match=r"sizing.sagc_prompt.*sagc_prompt.long_fraction"):
        SizingSection.from_dict({"name": "sagc-prompt", "sagc_prompt": {"long_fraction": 1.5}})
    with pytest.raises(ValueError, match="unknown sagc_prompt key"):
        PromptSAGCConfig.from_dict({"long_fractions": 0.5})
    with pytest.raises(ValueError, match="sizing.sagc_prompt.seed"):
        SizingSection.from_dict({"name": "sagc-prompt", "sagc_prompt": {"seed": 1}})


def test_prompt_config_dry_run_enumerates_its_grid(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--directory", str(tmp_path),
                           "--configfile", *map(str, PROMPT_GRID)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    for sizing in ("sagc-prompt-g16", "sagc-prompt", "sagc-prompt-fast", "g16"):
        assert f"results/prompt/train/tiny-qwen2/grpo/{sizing}/seed1/done.json" in out
    assert out.count("rule train:") == 48
