"""Per-run task YAMLs: data paths resolved against --data-dir, overrides, clear errors; the
metadata the pipeline reads from them."""

import shutil

import pytest
import yaml

from sagc.evaluate.config import GenerationOverrides
from sagc.evaluate.taskcfg import (
    TASKS_DIR,
    MissingDataError,
    benchmarks,
    load_task_config,
    task_benchmarks,
    task_metas,
    task_yaml_paths,
    world_tasks,
    write_run_tasks,
)

LOCAL_TASKS = ("tiny_arith", "tiny_arith_heldout")
PAPER_TASKS = ("aime24_boxed", "amc23_boxed", "gpqa_diamond_boxed")


def test_every_packaged_task_is_listed_in_its_world():
    assert set(task_yaml_paths()) == set(LOCAL_TASKS) | set(PAPER_TASKS)
    assert world_tasks("tiny") == list(LOCAL_TASKS)
    assert world_tasks("hub") == list(PAPER_TASKS)


def test_staged_benchmarks_come_from_the_task_yamls():
    assert task_benchmarks(list(PAPER_TASKS)) == ["aime24", "amc23", "gpqa_diamond"]
    assert task_benchmarks(["gpqa_diamond_boxed", "aime24_boxed"]) == ["gpqa_diamond", "aime24"]
    assert task_benchmarks(list(LOCAL_TASKS)) == []
    gpqa = benchmarks()["gpqa_diamond"]
    assert (gpqa.dataset, gpqa.config, gpqa.split, gpqa.normalizer, gpqa.gated) == (
        "Idavidrein/gpqa",
        "gpqa_diamond",
        "train",
        "gpqa",
        True,
    )
    assert benchmarks()["amc23"].options == {"year": 2023}
    assert {n: m.problems for n, m in task_metas().items()} == {
        "aime24_boxed": 30,
        "amc23_boxed": 40,
        "gpqa_diamond_boxed": 198,
        "tiny_arith": None,
        "tiny_arith_heldout": None,
    }
    with pytest.raises(ValueError, match="unknown task"):
        task_benchmarks(["aime25_boxed"])


def _tasks_dir_with(tmp_path, name, edit):
    """The packaged task YAMLs, with ``name``'s metadata changed by ``edit``."""
    d = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, d)
    cfg = yaml.safe_load((d / name).read_text().replace("!function ", ""))
    edit(cfg["metadata"])
    (d / name).write_text(yaml.safe_dump(cfg))
    return d


@pytest.mark.parametrize(
    "name, edit, key",
    [
        ("aime24_boxed.yaml", lambda m: m.pop("sagc_source"), "metadata.sagc_source is missing"),
        ("aime24_boxed.yaml", lambda m: m.pop("sagc_benchmark"), "metadata.sagc_benchmark is missing"),
        ("aime24_boxed.yaml", lambda m: m.pop("sagc_problems"), "metadata.sagc_problems"),
        ("aime24_boxed.yaml", lambda m: m["sagc_source"].update(normalizer="aimee"), "metadata.sagc_source.normalizer"),
        ("aime24_boxed.yaml", lambda m: m["sagc_source"].pop("dataset"), "metadata.sagc_source.dataset"),
        ("aime24_boxed.yaml", lambda m: m.update(sagc_benchmark="aime25"), "dataset_kwargs.data_files"),
        ("tiny_arith.yaml", lambda m: m.pop("sagc_world"), "metadata.sagc_world"),
    ],
)
def test_a_task_yaml_without_the_metadata_the_pipeline_reads_is_refused(tmp_path, name, edit, key):
    d = _tasks_dir_with(tmp_path, name, edit)
    with pytest.raises(ValueError, match="task YAML .*" + name.replace(".", r"\.")) as err:
        task_metas(d)
    assert key in str(err.value)
    assert task_metas(TASKS_DIR)  # the packaged ones pass


def test_two_tasks_staging_one_benchmark_from_different_sources_are_refused(tmp_path):
    d = _tasks_dir_with(tmp_path, "amc23_boxed.yaml", lambda m: m["sagc_source"].update(options={"year": 2024}))
    shutil.copy(TASKS_DIR / "amc23_boxed.yaml", d / "amc23_again.yaml")
    text = (d / "amc23_again.yaml").read_text().replace("task: amc23_boxed", "task: amc23_again")
    (d / "amc23_again.yaml").write_text(text)
    with pytest.raises(ValueError, match="benchmark 'amc23' is staged from two different sources"):
        task_metas(d)


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


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"max_gen_toks": 0}, "max_gen_toks"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"repeats": 0}, "repeats"),
    ],
)
def test_overrides_are_validated(kwargs, key):
    with pytest.raises(ValueError, match=key):
        GenerationOverrides.from_dict(kwargs)


def test_every_task_scores_with_sagc_answers_and_names_its_budget():
    for name in task_yaml_paths():
        cfg = load_task_config(name)
        assert cfg["process_results"] == "sagc.evaluate.scoring.process_results"
        assert cfg["filter_list"][0]["filter"][0]["filter_fn"] == "sagc.evaluate.scoring.keep_all_samples"
        assert int(cfg["generation_kwargs"]["max_gen_toks"]) > 0
        assert bool(cfg["metadata"].get("sagc_benchmark")) == (name in PAPER_TASKS)


def test_repeats_per_task_override_only_the_named_tasks(tmp_path, eval_data_dir):
    configs = write_run_tasks(
        list(LOCAL_TASKS), eval_data_dir, tmp_path / "t", GenerationOverrides(repeats={"tiny_arith": 6})
    )
    assert configs["tiny_arith"]["repeats"] == 6
    assert configs["tiny_arith_heldout"]["repeats"] == load_task_config("tiny_arith_heldout")["repeats"]
    with pytest.raises(
        ValueError,
        match=r"repeats must be a positive integer or a mapping task -> positive integer, "
        r"got \{'tiny_arith': 0\}",
    ):
        GenerationOverrides.from_dict({"repeats": {"tiny_arith": 0}})
    with pytest.raises(ValueError, match=r"repeats names task\(s\) \['aime24_boxed'\]"):
        write_run_tasks(
            ["tiny_arith"], eval_data_dir, tmp_path / "u", GenerationOverrides(repeats={"aime24_boxed": 64})
        )


def test_every_task_reports_strict_and_lenient_scores():
    for name in task_yaml_paths():
        metrics = [m["metric"] for m in load_task_config(name)["metric_list"]]
        assert metrics == ["exact_match", "exact_match_lenient"], name
