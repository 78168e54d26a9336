"""Paper tasks (AIME 2024, AMC 2023, GPQA-diamond) on tiny local stand-ins with the real
columns: staging from a local copy, the YAMLs loading in lm-eval and building requests, and
the documented errors when nothing is staged."""

import json

import pytest

from sagc.evaluate.cli import main
from sagc.evaluate.config import GenerationOverrides
from sagc.evaluate.stage import StageError, stage
from sagc.evaluate.taskcfg import MissingDataError, write_run_tasks

PAPER_TASKS = ("aime24_boxed", "amc23_boxed", "gpqa_diamond_boxed")


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory):
    """Stand-ins in the Hub sources' own columns (AIME: ID/Problem/Answer; AMC: float answers
    and AoPS urls of two years; GPQA: the official CSV's columns)."""
    import pandas as pd

    d = tmp_path_factory.mktemp("bench_src")
    _write_jsonl(
        d / "aime24.jsonl",
        [
            {"ID": f"2024-I-{i}", "Problem": f"What is {i}+{i}?", "Solution": "...", "Answer": 2 * i}
            for i in range(1, 4)
        ],
    )
    _write_jsonl(
        d / "amc23.jsonl",
        [
            {
                "id": i,
                "problem": f"AMC problem {i}",
                "answer": float(10 * i),
                "url": f"https://artofproblemsolving.com/wiki/index.php/{2022 + i % 2}_AMC_12A_Problems/Problem_{i}",
            }
            for i in range(6)
        ],
    )
    pd.DataFrame(
        [
            {
                "Record ID": f"rec{i}",
                "Question": f"Q{i}?",
                "Correct Answer": f"yes{i}",
                "Incorrect Answer 1": f"no{i}a",
                "Incorrect Answer 2": f"no{i}b",
                "Incorrect Answer 3": f"no{i}c",
                "Subdomain": "physics",
            }
            for i in range(5)
        ]
    ).to_csv(d / "gpqa_diamond.csv", index=False)
    return d


@pytest.fixture(scope="module")
def cache(tmp_path_factory, source_dir):
    c = tmp_path_factory.mktemp("bench_cache")
    assert (
        main(["stage", "--benchmarks", "aime24,amc23,gpqa_diamond", "--cache", str(c), "--source-dir", str(source_dir)])
        == 0
    )
    return c


def test_stage_normalises_sources(cache):
    aime = [json.loads(line) for line in (cache / "aime24.jsonl").read_text().splitlines()]
    assert aime[0] == {"id": "2024-I-1", "problem": "What is 1+1?", "answer": "2"}
    amc = [json.loads(line) for line in (cache / "amc23.jsonl").read_text().splitlines()]
    assert [r["id"] for r in amc] == ["1", "3", "5"]  # only the 2023 urls
    assert amc[0]["answer"] == "10"  # 10.0 from the source, without the ".0"
    meta = json.loads((cache / "gpqa_diamond.meta.json").read_text())
    assert meta["rows"] == 5 and meta["source"].endswith("gpqa_diamond.csv")


def _build(tmp_path, cache, gen=None):
    gen = gen or GenerationOverrides()
    from lm_eval.tasks import TaskManager

    write_run_tasks(list(PAPER_TASKS), cache, tmp_path / "tasks", gen)
    tm = TaskManager(include_path=str(tmp_path / "tasks"), include_defaults=False)
    tasks = tm.load(list(PAPER_TASKS))["tasks"]
    for task in tasks.values():
        task.build_all_requests(limit=None, rank=0, world_size=1)
    return tasks


def test_paper_yamls_build_boxed_requests(tmp_path, cache):
    tasks = _build(tmp_path, cache)
    assert set(tasks) == set(PAPER_TASKS)
    aime = tasks["aime24_boxed"]
    assert len(aime.instances) == 3
    context, gen_kwargs = aime.instances[0].args
    assert "What is 1+1?" in context and "\\boxed{}" in context and context.endswith("Assistant:")
    assert gen_kwargs["max_gen_toks"] == 8192 and gen_kwargs["temperature"] == 0.6
    assert gen_kwargs["do_sample"] is True and gen_kwargs["top_p"] == 0.95
    assert aime.instances[0].repeats == 64  # open-r1's n for AIME
    assert len(tasks["amc23_boxed"].instances) == 3

    gpqa = tasks["gpqa_diamond_boxed"]
    docs = list(gpqa.eval_docs)
    for inst, doc in zip(gpqa.instances, docs):
        ctx = inst.args[0]
        letter = doc["answer"]
        assert f"({letter}) {doc['Correct Answer']}" in ctx  # the letter points at the right text
    # a scripted correct answer scores 1 through the task's own process_results
    assert gpqa.process_results(docs[0], [[f"so \\boxed{{{docs[0]['answer']}}}"]])["exact_match"] == 1.0
    assert aime.process_results(list(aime.eval_docs)[1], [["\\boxed{4}", "\\boxed{5}"]]) == {
        "exact_match": 0.5,
        "exact_match_lenient": 0.5,
    }


def test_generation_overrides_reach_the_requests(tmp_path, cache):
    tasks = _build(tmp_path, cache, GenerationOverrides(max_gen_toks=64, temperature=0.0, repeats=2))
    inst = tasks["aime24_boxed"].instances[0]
    assert inst.args[1]["max_gen_toks"] == 64 and inst.args[1]["do_sample"] is False
    assert "top_p" not in inst.args[1] and inst.repeats == 2


def test_missing_cache_names_path_and_stage_command(tmp_path, capsys):
    data = tmp_path / "empty_cache"
    data.mkdir()
    with pytest.raises(MissingDataError) as err:
        write_run_tasks(["amc23_boxed"], data, tmp_path / "tasks", GenerationOverrides())
    msg = str(err.value)
    assert str(data / "amc23.jsonl") in msg
    assert f"python -m sagc.evaluate stage --benchmarks amc23 --cache {data}" in msg
    # through the CLI: exit status 2 and the same message, before any model is loaded
    model = tmp_path / "no_model_needed"
    model.mkdir()
    rc = main(
        [
            "run",
            "--model",
            str(model),
            "--tasks",
            "gpqa_diamond_boxed",
            "--data-dir",
            str(data),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 2
    stderr = capsys.readouterr().err
    assert "gpqa_diamond.jsonl does not exist" in stderr and "gated" in stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_stage_offline_without_cache_says_what_to_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(StageError) as err:
        stage(["gpqa_diamond"], tmp_path / "c")
    msg = str(err.value)
    assert "Idavidrein/gpqa" in msg and "HF_TOKEN" in msg and "--source-dir" in msg
    assert str(tmp_path / "c" / "gpqa_diamond.jsonl") in msg


def test_stage_keeps_existing_cache_offline(tmp_path, monkeypatch, cache):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert stage(["aime24"], cache)["aime24"] == cache / "aime24.jsonl"


def test_stage_rejects_unknown_benchmark_and_bad_columns(tmp_path):
    with pytest.raises(ValueError, match="math500"):
        stage(["math500"], tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    _write_jsonl(src / "aime24.jsonl", [{"ID": 1, "Problem": "p"}])
    with pytest.raises(ValueError, match="'Answer'"):
        stage(["aime24"], tmp_path / "c", source_dir=src)
