"""The warm start really teaches a real (tiny) model the task; bad settings fail clearly."""

import pytest
import torch
from scipy.stats import binomtest

from sagc.tiny.measure import SampleParams, accuracy, sample_completions
from sagc.tiny.models import ModelSize, build_model
from sagc.tiny.task import CHECK_LINE, Problem, TaskParams, behaviour_of, generate_splits
from sagc.tiny.tokenizer import load_tokenizer
from sagc.tiny.warmstart import WarmStartParams, _encode, draw_behaviour, warm_start

# An easy corner of the task family (mod 4, one operator, 2-4 steps: 12 arithmetic facts)
# keep this test to well under a minute; the default recipe is the same code and model shape
# with more steps on the full task (which takes minutes). A smaller 2-layer model stayed
# near chance here even after 300 steps.
EASY = TaskParams(
    modulus=4,
    operators="+",
    median_steps=2.5,
    min_steps=2,
    max_steps=4,
    heldout_min_steps=5,
    heldout_max_steps=6,
    n_train=500,
    n_eval=192,
    n_heldout=1,
)
SMALL = ModelSize(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128)
CHANCE = 0.25  # one digit out of four


@pytest.mark.slow
def test_warm_start_beats_chance_and_stops_with_eos(tiny_tokenizer_dir):
    torch.set_num_threads(1)
    splits = generate_splits(EASY, seed=11)
    tok = load_tokenizer(tiny_tokenizer_dir)
    model = build_model("llama", tok, ModelSize(), seed=11)  # the default shape
    sample = SampleParams(max_new_tokens=48)
    before = accuracy(model, tok, splits["eval"], sample, greedy=True)
    report = warm_start(
        model,
        tok,
        splits["train"],
        WarmStartParams(
            steps=250,
            batch_size=16,
            learning_rate=3e-3,
            warmup_steps=10,
            miscount_frac=0.0,
            slip_frac=0.0,
            check_frac=0.0,
            lesson_frac=0.0,
        ),
        seed=11,
        modulus=EASY.modulus,
    )
    after = accuracy(model, tok, splits["eval"], sample, greedy=True)
    assert before["accuracy"] == 0.0
    assert after["format_rate"] >= 0.9  # learnt the format: one final box, then eos
    assert after["truncated_frac"] <= 0.1
    # Beats chance by a binomial test on 192 problems (seen: 0.48 with seed 11, where the
    # one-sided p < 0.001 bound sits near 0.34: about four standard errors of room).
    correct = round(after["accuracy"] * after["n"])
    assert binomtest(correct, after["n"], CHANCE, alternative="greater").pvalue < 1e-3, after
    assert report["final_loss"] < 1.0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"steps": -1}, "steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"miscount_frac": 1.0}, "miscount_frac"),
        ({"slip_frac": -0.1}, "slip_frac"),
        ({"check_frac": 1.5}, "check_frac"),
        ({"check_continue": 1.0}, "check_continue"),
        ({"lesson_frac": -1}, "lesson_frac"),
        ({"max_checks": 0}, "max_checks"),
        ({"check_slip_frac": 1.0}, "check_slip_frac"),
        ({"max_length": 8}, "max_length"),
    ],
)
def test_bad_warm_start_parameters_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        WarmStartParams(**kwargs).validate()


def test_empty_training_set_is_rejected(tiny_tokenizer_dir):
    tok = load_tokenizer(tiny_tokenizer_dir)
    with pytest.raises(ValueError, match="at least one"):
        warm_start(build_model("qwen2", tok, SMALL), tok, [], WarmStartParams(steps=1))


def test_sample_completions_lengths_count_eos_and_cap(tiny_qwen2_dir, tiny_data_dir):
    from sagc.tiny.models import load_model
    from sagc.tiny.task import load_split

    tok, model = load_tokenizer(tiny_qwen2_dir), load_model(tiny_qwen2_dir)
    prompts = [r["prompt"] for r in load_split(tiny_data_dir, "train")[:6]]
    torch.manual_seed(0)
    texts, lengths = sample_completions(model, tok, prompts, SampleParams(max_new_tokens=24))
    assert len(texts) == len(lengths) == 6
    assert all(1 <= n <= 24 for n in lengths)
    assert all(isinstance(t, str) and tok.eos_token not in t for t in texts)


def test_behaviour_mixture_matches_the_configured_shares():
    """The SFT targets hold each behaviour at its configured rate (binomial 4-sigma bounds);
    checks repeat at the continue rate, up to ``max_checks``; lessons always check."""
    import random

    params = WarmStartParams(
        miscount_frac=0.25, slip_frac=0.15, check_frac=0.03, check_continue=0.5, max_checks=2, lesson_slip_frac=0.5
    )
    rng, n = random.Random(0), 20000
    problems = [
        Problem(rng.choice("abcdefgh"), rng.randrange(10), rng.choice("+-"), rng.randint(1, 9), rng.randint(2, 5))
        for _ in range(200)
    ]
    seen = {"miscount": 0, "slip": 0, "check": 0}
    passes = []
    for i in range(n):
        p = problems[i % len(problems)]
        text, flags = draw_behaviour(p, rng, params)
        for k in seen:
            seen[k] += flags[k]
        if flags["check"]:
            passes.append(text.count(CHECK_LINE))
            assert behaviour_of(text, p) == "check"
        elif flags["miscount"]:
            assert behaviour_of(text, p) == "miscount"
        else:
            assert behaviour_of(text, p) == ("slip" if flags["slip"] else "plain")
    for k, want in (("miscount", 0.25), ("slip", 0.15), ("check", 0.03)):
        assert abs(seen[k] / n - want) < 4 * (want * (1 - want) / n) ** 0.5, (k, seen[k] / n)
    assert set(passes) == {1, 2} and 0.4 < passes.count(2) / len(passes) < 0.6
    lessons = [draw_behaviour(problems[0], rng, params, lesson=True)[1] for _ in range(2000)]
    assert all(f["check"] for f in lessons)
    assert 0.45 < sum(f["slip"] for f in lessons) / 2000 < 0.55


def test_a_lesson_trains_only_the_check(tiny_tokenizer_dir):
    """A lesson's loss starts after the check line: the decision to start a check is only
    learnt from ordinary examples, at ``check_frac``."""
    tok = load_tokenizer(tiny_tokenizer_dir)
    p = Problem("a", 1, "+", 2, 2)
    from sagc.tiny.task import render_completion

    text = render_completion(p, slip=(1, 3), checks=1)
    ids, n_context = _encode(tok, p.prompt, text, 160, lesson=True)
    assert tok.decode(ids[:n_context]) == p.prompt + "b=1+2=6\nc=6+2=8\n" + CHECK_LINE
    assert tok.decode(ids[n_context:], skip_special_tokens=True) == (
        "\nstart a:1 next=prev+2 find c\nb=1+2=3\nc=3+2=5\n\\boxed{5}"
    )
    ids, n_context = _encode(tok, p.prompt, text, 160)
    assert tok.decode(ids[:n_context]) == p.prompt


def test_check_slips_make_that_share_of_check_rows_wrong():
    """With ``check_slip_frac`` s, a check row's last pass slips, so its box is wrong, in a
    share s of check rows (binomial 4-sigma bound); the first pass is drawn as before."""
    import random

    from sagc.answers import is_correct

    params = WarmStartParams(check_frac=0.5, check_slip_frac=0.3, max_checks=2, check_continue=0.5)
    rng = random.Random(4)
    problems = [Problem("c", d, "+", 3, 2 + d % 4) for d in range(10)]
    wrong = checked = 0
    for i in range(4000):
        p = problems[i % 10]
        text, flags = draw_behaviour(p, rng, params)
        if flags["check"]:
            checked += 1
            wrong += not is_correct(text, p.answer)
    assert abs(wrong / checked - 0.3) < 4 * (0.3 * 0.7 / checked) ** 0.5, wrong / checked
