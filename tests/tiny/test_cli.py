"""The CLI the Snakemake rules call: outputs, reports and flag-naming errors."""

import json
import subprocess
import sys

import pytest

from sagc.tiny.cli import main


def test_data_and_tokenizer_commands(tmp_path, capsys):
    data, tok = tmp_path / "data", tmp_path / "tok"
    assert (
        main(["data", "--out", str(data), "--seed", "3", "--n-train", "40", "--n-eval", "8", "--n-heldout", "4"]) == 0
    )
    for split, n in (("train", 40), ("eval", 8), ("heldout", 4)):
        assert len((data / f"{split}.jsonl").read_text().splitlines()) == n
    report = json.loads((data / "build.json").read_text())
    assert report["params"]["n_train"] == 40 and report["seconds"] >= 0
    assert main(["tokenizer", "--data", str(data), "--out", str(tok)]) == 0
    assert (tok / "tokenizer.json").is_file() and (tok / "tokenizer_config.json").is_file()
    # Same seed, same bytes: the pipeline step is reproducible.
    main(
        [
            "data",
            "--out",
            str(tmp_path / "again"),
            "--seed",
            "3",
            "--n-train",
            "40",
            "--n-eval",
            "8",
            "--n-heldout",
            "4",
        ]
    )
    assert (tmp_path / "again" / "train.jsonl").read_bytes() == (data / "train.jsonl").read_bytes()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["data", "--out", "X", "--max-steps", "1"], "--max-steps"),
        (["data", "--out", "X", "--modulus", "12"], "--modulus"),
        (["data", "--out", "X", "--operators", "+%"], "--operators"),
    ],
)
def test_bad_data_flags_name_the_flag(argv, flag, tmp_path):
    argv = [a.replace("X", str(tmp_path / "d")) for a in argv]
    with pytest.raises(SystemExit, match=flag):
        main(argv)


def test_bad_model_and_measure_flags_name_the_flag(tiny_data_dir, tiny_tokenizer_dir, tiny_qwen2_dir, tmp_path):
    base = [
        "base-model",
        "--arch",
        "qwen2",
        "--data",
        str(tiny_data_dir),
        "--tokenizer",
        str(tiny_tokenizer_dir),
        "--out",
        str(tmp_path / "m"),
    ]
    with pytest.raises(SystemExit, match="--hidden-size"):
        main(base + ["--hidden-size", "30"])
    with pytest.raises(SystemExit, match="--warm-check-frac"):
        main(base + ["--warm-check-frac", "1.5"])
    meas = ["measure", "--model", str(tiny_qwen2_dir), "--data", str(tiny_data_dir), "--out", str(tmp_path / "m.json")]
    with pytest.raises(SystemExit, match="--tau"):
        main(meas + ["--tau", "0.5"])


def test_argparse_errors_name_the_flag(tmp_path):
    """argparse-level errors (missing folders, non-integers) exit 2 naming the flag."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagc.tiny",
            "tokenizer",
            "--data",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--data" in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagc.tiny",
            "measure",
            "--model",
            str(tmp_path),
            "--data",
            str(tmp_path),
            "--out",
            "x.json",
            "--group-sizes",
            "4",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--group-sizes" in proc.stderr


def test_measure_command_writes_per_group_size_report(tiny_qwen2_dir, tiny_data_dir, tmp_path):
    out = tmp_path / "measure.json"
    assert (
        main(
            [
                "measure",
                "--model",
                str(tiny_qwen2_dir),
                "--data",
                str(tiny_data_dir),
                "--out",
                str(out),
                "--group-sizes",
                "2",
                "4",
                "--steps",
                "2",
                "--max-completion-length",
                "48",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert [r["group_size"] for r in report["per_group_size"]] == [2, 4]
    for r in report["per_group_size"]:
        assert len(r["ratios"]) == 2 and 0.0 <= r["straggler_rate"] <= 1.0
        assert r["lengths"]["n"] == 2 * 2 * r["group_size"]  # steps x prompts x G
        assert 1 <= r["lengths"]["median"] <= r["lengths"]["max"] <= 48
        # Every sampled completion is classified into exactly one behaviour.
        assert abs(sum(b["share"] for b in r["behaviours"].values()) - 1.0) < 1e-9
        assert set(r["behaviours"]) == {"plain", "miscount", "slip", "check", "other"}
    assert report["tau"] == 2.0 and report["prompts_per_step"] == 2
