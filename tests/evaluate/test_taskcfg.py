"""Per-run task YAMLs: data paths resolved against --data-dir, overrides, clear errors."""

import pytest

from sagc.evaluate.taskcfg import (
    LOCAL_TASKS,
    PAPER_TASKS,
    GenerationOverrides,
    MissingDataError,
    load_task_config,
    task_yaml_paths,
    write_run_tasks,
)


def test_every_packaged_task_is_listed():
    assert set(task_yaml_paths()) == set(LOCAL_TASKS) | set(PAPER_TASKS)


def test_run_copy_points_at_data_dir_and_keeps_functions(tmp_path, eval_data_dir):
    out = tmp_path / "tasks"
    configs = write_run_tasks(list(LOCAL_TASKS), eval_data_dir, out, GenerationOverrides(max_gen_toks=32))
    text = (out / "tiny_arith_heldout.yaml").read_text()
    assert str(eval_data_dir.resolve() / "heldout.jsonl") in text
    assert "!function 'sagc.evaluate.scoring.process_results'" in text
    assert configs["tiny_arith"]["generation_kwargs"]["max_gen_toks"] == 32
    # the packaged YAML is untouched (relative path, its own budget)
    assert load_task_config("tiny_arith")["dataset_kwargs"]["data_files"] == {"test": "eval.jsonl"}
    # a rerun with fewer tasks leaves only those registered
    write_run_tasks(["tiny_arith"], eval_data_dir, out, GenerationOverrides())
    assert sorted(p.name for p in out.glob("*.yaml")) == ["tiny_arith.yaml"]


def test_missing_tiny_split_is_named(tmp_path):
    with pytest.raises(MissingDataError, match=r"eval\.jsonl does not exist"):
        write_run_tasks(["tiny_arith"], tmp_path, tmp_path / "t", GenerationOverrides())


def test_unknown_and_duplicate_tasks(tmp_path, eval_data_dir):
    with pytest.raises(ValueError, match="unknown task 'gsm8k'"):
        write_run_tasks(["gsm8k"], eval_data_dir, tmp_path, GenerationOverrides())
    with pytest.raises(ValueError, match="twice"):
        write_run_tasks(["tiny_arith", "tiny_arith"], eval_data_dir, tmp_path, GenerationOverrides())


@pytest.mark.parametrize("kwargs, key", [
    ({"max_gen_toks": 0}, "max_gen_toks"), ({"temperature": -1.0}, "temperature"),
    ({"top_p": 0.0}, "top_p"), ({"repeats": 0}, "repeats"),
])
def test_overrides_are_validated(kwargs, key):
    with pytest.raises(ValueError, match=key):
        GenerationOverrides(**kwargs)


def test_every_task_scores_with_sagc_answers_and_names_its_budget():
    for name in task_yaml_paths():
        cfg = load_task_config(name)
        assert cfg["process_results"] == "sagc.evaluate.scoring.process_results"
        assert cfg["filter_list"][0]["filter"][0]["filter_fn"] == "sagc.evaluate.scoring.keep_all_samples"
        assert int(cfg["generation_kwargs"]["max_gen_toks"]) > 0
        assert bool(cfg.get("metadata", {}).get("sagc_benchmark")) == (name in PAPER_TASKS)


def test_repeats_per_task_override_only_the_named_tasks(tmp_path, eval_data_dir):
    configs = write_run_tasks(list(LOCAL_TASKS), eval_data_dir, tmp_path / "t",
                              GenerationOverrides(repeats={"tiny_arith": 6}))
    assert configs["tiny_arith"]["repeats"] == 6
    assert configs["tiny_arith_heldout"]["repeats"] == load_task_config("tiny_arith_heldout")["repeats"]
    with pytest.raises(ValueError, match=r"repeats\.tiny_arith must be an integer >= 1"):
        GenerationOverrides(repeats={"tiny_arith": 0})
    with pytest.raises(ValueError, match=r"repeats names task\(s\) \['aime24_boxed'\]"):
        write_run_tasks(["tiny_arith"], eval_data_dir, tmp_path / "u", GenerationOverrides(repeats={"aime24_boxed": 64}))


def test_every_task_reports_strict_and_lenient_scores():
    for name in task_yaml_paths():
        metrics = [m["metric"] for m in load_task_config(name)["metric_list"]]
        assert metrics == ["exact_match", "exact_match_lenient"], name
