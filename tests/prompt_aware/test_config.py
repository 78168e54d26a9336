"""The sagc_prompt block: registry, pipeline config, cell config; bad values name the key."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sagc.controller import FixedGroupSize, parse_sizing
from sagc.pipeline import config as pipeline_config
from sagc.pipeline.cells import sizing_section
from sagc.prompt_aware.config import PromptSAGCConfig
from sagc.prompt_aware.policy import PromptAwareSAGC
from sagc.prompt_aware.schedule import TailBatchingStream
from sagc.prompts import PromptStream
from sagc.train.config import SizingSection
from tests.shipped_configs import raw_config

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


def test_the_sizers_supply_their_prompt_stream():
    """Every sizing goes through ``prompt_stream``: sagc-prompt* return the block's tail
    batching over the base's prompts and seed, the others the base itself."""
    lengths = (3, 9, 4, 12, 7, 20, 2, 6)
    token_ids = [[5] * n for n in lengths]
    block = {"tau": 2.5, "long_fraction": 0.25, "queue_rounds": 3, "hash_dim": 0}
    hybrid = parse_sizing("sagc-prompt").build(block, seed=1)
    alone = parse_sizing("sagc-prompt-g16").build({**block, "group_size": 16}, seed=1)
    streams = [
        sizer.prompt_stream(PromptStream(8, seed=3, shuffle=False), token_ids=token_ids) for sizer in (hybrid, alone)
    ]
    for stream in streams:
        assert isinstance(stream, TailBatchingStream)
        assert (stream.n, stream.seed, stream.shuffle, stream.long_fraction, stream.queue_rounds) == (
            8,
            3,
            False,
            0.25,
            3,
        )
        np.testing.assert_array_equal(stream.predictor.x, np.c_[np.ones(8), np.log(lengths)])  # hash_dim 0
    assert hybrid.schedule is streams[0]  # its round kinds pick the controller
    assert isinstance(alone, FixedGroupSize) and alone.state_dict()["kind"] == "fixed"  # the baseline's state
    for name in ("g16", "sagc", "sagc-fast"):
        base = PromptStream(8, seed=3)
        assert parse_sizing(name).build({"tau": 2.5}).prompt_stream(base, token_ids=token_ids) is base


def test_given_features_inform_the_predictor_instead_of_token_ids():
    sizer = parse_sizing("sagc-prompt").build({"tau": 2.5})
    features = np.c_[np.ones(6), np.arange(6.0)]
    stream = sizer.prompt_stream(PromptStream(6, seed=0), token_ids=[[1]] * 6, features=features)
    np.testing.assert_array_equal(stream.predictor.x, features)


def test_prompt_config_cells_carry_the_merged_block():
    cfg = pipeline_config.load_config(*PROMPT_GRID)
    section = sizing_section(cfg, "sagc-prompt-fast")
    block = section["sagc_prompt"]
    assert block["tau"] == cfg.sagc.tau and block["long_fraction"] == 0.25
    assert block["counterfactual"] is True and block["selection"] == "constrained"
    assert sizing_section(cfg, "sagc-prompt-g16")["sagc_prompt"]["group_size"] == 16
    assert SizingSection.from_dict(section).policy_config(seed=1).sagc.counterfactual


@pytest.mark.parametrize(
    "key, value",
    [
        ("long_fraction", 0.0),
        ("queue_rounds", 0),
        ("hash_dim", -1),
        ("edge_tokens", 1.5),
        ("group_size", 1),
        ("quantile", 0.2),
        ("history_decay", 2.0),
    ],
)
def test_bad_values_name_the_key_in_the_pipeline_config(key, value):
    bad = raw_config(PROMPT_GRID)
    bad["sagc_prompt"][key] = value
    with pytest.raises(pipeline_config.ConfigError, match=f"sagc_prompt.{key}"):
        pipeline_config.prepare(bad, "configs/prompt.yaml")


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
