"""Reward functions: correct, wrong, malformed, truncated and conversational completions."""

import pytest

from sagc.rewards import FORMAT_REWARD, REWARD_FUNCS, correctness_reward, format_reward

GOOD = "e=7+4=1\nf=1*2=2\n\\boxed{2}"


def test_correct_wrong_and_malformed():
    completions = [
        GOOD,  # correct and well formed
        "e=7+4=1\nf=1*2=3\n\\boxed{3}",  # wrong answer, well formed
        "e=7+4=1\nf=1*2=2\n",  # no box
        "e=7+4=1\nf=1*2=2\n\\boxed{2",  # truncated inside the box
        "e=7+4=1\nf=1*2",  # truncated mid-solution
        "\\boxed{5}\nCheck again:\n\\boxed{2}",  # two boxes: last one counts, not well formed
        "\\boxed{2} and more text",  # box not at the end
        "\\boxed{}",  # empty box
        "",
    ]
    answers = ["2"] * len(completions)
    assert correctness_reward(None, completions, answer=answers) == [1.0, 0, 0, 0, 0, 1.0, 1.0, 0, 0]
    assert format_reward(None, completions, answer=answers) == [FORMAT_REWARD, FORMAT_REWARD] + [0.0] * 7
    # An indicator: the config weight (rewards.format) is the only scale applied.
    assert FORMAT_REWARD == 1.0


def test_non_string_and_conversational_completions_never_raise():
    conv = [
        [{"role": "assistant", "content": GOOD}],
        [{"role": "assistant", "content": None}],
        [{"role": "assistant"}],
        None,
        42,
        {"content": GOOD},
        [],
    ]
    answers = ["2"] * len(conv)
    assert correctness_reward(["p"] * len(conv), conv, answer=answers) == [1.0, 0, 0, 0, 0, 1.0, 0]
    assert format_reward(["p"] * len(conv), conv) == [FORMAT_REWARD, 0, 0, 0, 0, FORMAT_REWARD, 0]


def test_answers_are_normalised_by_sagc_answers():
    assert correctness_reward(None, ["\\boxed{ 07 }", "\\boxed{7.0}"], answer=["7", 7]) == [1.0, 1.0]


def test_missing_or_misaligned_answer_column_is_a_clear_error():
    with pytest.raises(ValueError, match="'answer'"):
        correctness_reward(None, [GOOD])
    with pytest.raises(ValueError, match="'answer'"):
        correctness_reward(None, [GOOD, GOOD], answer=["2"])


def test_trl_signature_and_order():
    assert REWARD_FUNCS == (correctness_reward, format_reward)
    # TRL passes extra columns and trainer_state through kwargs: they must be ignored.
    out = correctness_reward(
        prompts=["p"], completions=[GOOD], answer=["2"], n_steps=[2], solution=[GOOD], trainer_state=None
    )
    assert out == [1.0]
