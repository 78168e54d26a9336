"""Hand-labelled responses: what a grader following each benchmark's convention scores.

Every label below was decided by reading the response against the benchmark's own rule, not
by running the code: AIME answers are integers 0-999 (leading zeros and thousands commas
are formatting), AMC 2023 answers are the value of the chosen option (the staged set keeps
values, not letters), GPQA answers are the letter of the correct option under our fixed
per-question order. The prompt asks for the final answer in a box, so the strict score
reads only a box; the lenient score also reads what lighteval's and Qwen2.5-Math's graders
fall back to when there is none (an "answer is" phrase, else the last number or option
label).
"""

import pytest

from sagc.answers import is_correct, is_correct_lenient

# (benchmark, response, reference, strict, lenient)
LABELLED = [
    # --- GPQA: the letter decides, however the box dresses it
    ("gpqa", "so the answer is \\boxed{C}", "C", True, True),
    ("gpqa", "\\boxed{(C)}", "C", True, True),
    ("gpqa", "\\boxed{c}", "C", True, True),
    ("gpqa", "\\boxed{\\textbf{C}}", "C", True, True),
    ("gpqa", "\\boxed{\\mathrm{C}}", "C", True, True),
    ("gpqa", "\\boxed{\\mathbf{C}}", "C", True, True),
    ("gpqa", "\\boxed{\\text{C}}", "C", True, True),
    ("gpqa", "\\boxed{\\text{(C)}}", "C", True, True),
    ("gpqa", "\\boxed{(C) 4.2 eV}", "C", True, True),
    ("gpqa", "\\boxed{C) 4.2 eV}", "C", True, True),
    ("gpqa", "\\boxed{C: 4.2 eV}", "C", True, True),
    ("gpqa", "\\boxed{C. 4.2 eV}", "C", True, True),
    ("gpqa", "\\boxed{\\textbf{(C)} 4.2 eV}", "C", True, True),
    ("gpqa", "\\fbox{C}", "C", True, True),
    ("gpqa", "\\boxed C", "C", True, True),
    ("gpqa", "\\boxed{(B) 4.2 eV}", "C", False, False),  # the letter decides, not the text
    ("gpqa", "\\boxed{4.2 eV}", "C", False, False),  # the prompt asks for the letter
    ("gpqa", "\\boxed{A} ... on reflection \\boxed{C}", "C", True, True),  # the last box
    ("gpqa", "\\boxed{C} ... on reflection \\boxed{A}", "C", False, False),
    ("gpqa", "The correct option is (C).", "C", False, True),  # no box: only lenient reads it
    ("gpqa", "Answer: C", "C", False, True),
    ("gpqa", "The answer is (D).", "C", False, False),
    ("gpqa", "I think it is C", "C", False, False),  # no box, no phrase, no (X) label
    # --- AIME: an integer; formatting does not change it
    ("aime", "Thus \\boxed{42}.", "42", True, True),
    ("aime", "\\boxed{042}", "42", True, True),
    ("aime", "\\boxed{\\textbf{42}}", "42", True, True),
    ("aime", "\\boxed{42.}", "42", True, True),
    ("aime", "\\boxed{$42$}", "42", True, True),
    ("aime", "\\fbox{42}", "42", True, True),
    ("aime", "so we get $\\boxed 42$", "42", True, True),
    ("aime", "\\boxed {42}", "42", True, True),
    ("aime", "\\boxed{43}", "42", False, False),
    ("aime", "\\boxed{42} is wrong, it is \\boxed{24}", "42", False, False),
    ("aime", "The answer is 42.", "42", False, True),
    ("aime", "so m+n = 42", "42", False, True),  # lenient: the last number
    ("aime", "so m+n = 42, hence 7 pairs", "42", False, False),  # the last number is 7
    ("aime", "\\boxed{1,000}", "1000", True, True),
    ("aime", "final: \\boxed{999} and a cut-off \\boxed{12", "999", True, True),
    ("aime", "no answer given", "42", False, False),
    # --- AMC 2023: the value decides; an option label in front of it is formatting
    ("amc", "\\boxed{\\textbf{(C) }42}", "42", True, True),
    ("amc", "\\boxed{(C) 42}", "42", True, True),
    ("amc", "\\boxed{\\textbf{(B) }36}", "42", False, False),
    ("amc", "\\boxed{\\frac{3}{4}}", "0.75", True, True),
    ("amc", "\\boxed{0.75}", "3/4", True, True),
    ("amc", "\\boxed{\\dfrac{\\sqrt3}{2}}", "\\frac{\\sqrt{3}}{2}", True, True),
    ("amc", "\\boxed{(C)}", "42", False, False),  # a letter alone names no value
    ("amc", "Therefore the answer is $\\frac{3}{4}$.", "3/4", False, True),
    # --- tiny world: one digit
    ("tiny", "c=3+4=7\n\\boxed{7}", "7", True, True),
    ("tiny", "c=3+4=7\n", "7", False, True),
    ("tiny", "c=3+4=1\n\\boxed{1}", "7", False, False),
]


@pytest.mark.parametrize("benchmark, response, reference, strict, lenient", LABELLED)
def test_labelled_response(benchmark, response, reference, strict, lenient):
    assert is_correct(response, reference) is strict
    assert is_correct_lenient(response, reference) is lenient


def test_the_table_is_large_and_covers_every_benchmark():
    assert len(LABELLED) >= 40
    assert {b for b, *_ in LABELLED} == {"gpqa", "aime", "amc", "tiny"}
