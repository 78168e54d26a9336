import pytest

from sagc.answers import extract_boxed, is_correct, normalize_answer


@pytest.mark.parametrize(
    "text, want",
    [
        ("so the answer is \\boxed{42}.", "42"),
        ("\\boxed{1} then \\boxed{2}", "2"),  # the last box counts
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # nested braces
        ("\\boxed{7} and a truncated \\boxed{12", "7"),  # unclosed last box: the earlier one
        ("no box here", None),
        ("\\boxed{", None),
        ("", None),
        (None, None),
        (["not", "a", "string"], None),
    ],
)
def test_extract_boxed(text, want):
    assert extract_boxed(text) == want


@pytest.mark.parametrize(
    "raw, want",
    [
        ("007", "7"),
        (" 42. ", "42"),
        ("1,234", "1234"),
        ("0.50", "1/2"),
        ("\\frac{1}{2}", "1/2"),
        ("\\dfrac{3}{6}", "1/2"),
        ("-3", "-3"),
        ("$5$", "5"),
        ("(b)", "B"),
        ("\\text{C}", "C"),
        ("x+1", "x+1"),
        ("", None),
        (None, None),
        ("1/0", "1/0"),  # not a number: compared as a string, never raises
    ],
)
def test_normalize_answer(raw, want):
    assert normalize_answer(raw) == want


def test_is_correct():
    assert is_correct("work ... \\boxed{12}", "12")
    assert is_correct("\\boxed{12.0}", 12)
    assert not is_correct("\\boxed{13}", "12")
    assert not is_correct("12", "12")  # unmarked answers don't count
    assert not is_correct(None, "12")
    assert not is_correct("\\boxed{}", "")
