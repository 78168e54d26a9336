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


#: Equivalent forms (reference, boxed answer) as competition sets write them: string
#: matching scores every one of these 0.
EQUIVALENT = [
    ("\\frac{\\sqrt{3}}{2}", "\\dfrac{\\sqrt3}{2}"),
    ("\\frac{1}{2}", "0.5"),
    ("\\frac12", "1/2"),
    ("[1, 2)", "[1,2)"),
    ("(-\\infty, 3]", "(-\\infty,3]"),
    ("\\frac{3\\pi}{4}", "3\\pi/4"),
    ("2\\pi", "\\pi \\cdot 2"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("1+x", "x+1"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("10^\\circ", "10"),
    ("1,000", "1000"),
]

DIFFERENT = [
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{2}}{2}"),
    ("[1, 2)", "[1,2]"),
    ("\\frac{3\\pi}{4}", "\\frac{\\pi}{4}"),
    ("x+1", "x-1"),
    ("7", "8"),
    ("B", "C"),
    ("B", "\\text{(C)}"),
    ("5", "\\frac{1}{0}"),
]


@pytest.mark.parametrize("reference, answer", EQUIVALENT)
def test_equivalent_forms_are_correct(reference, answer):
    assert is_correct(f"so \\boxed{{{answer}}}", reference)


@pytest.mark.parametrize("reference, answer", DIFFERENT)
def test_different_answers_are_wrong(reference, answer):
    assert not is_correct(f"so \\boxed{{{answer}}}", reference)


def test_plain_numbers_and_letters_never_reach_the_symbolic_check(monkeypatch):
    """The tiny world's single digits and GPQA's letters are decided by the string path."""
    import sagc.answers as answers

    def boom(*args):
        raise AssertionError("math-verify called")

    monkeypatch.setattr(answers, "equivalent_math", boom)
    assert is_correct("\\boxed{7}", "7") and not is_correct("\\boxed{3}", "7")
    assert is_correct("\\boxed{(b)}", "B") and not is_correct("\\boxed{A) 5 m/s}", "B")


def test_symbolic_check_works_off_the_main_thread():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(is_correct, "\\boxed{\\dfrac{\\sqrt3}{2}}", "\\frac{\\sqrt{3}}{2}").result()
