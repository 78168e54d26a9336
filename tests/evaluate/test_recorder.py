"""Exact output length / truncation of one generated row."""

from sagc.evaluate.recorder import GenerationRecord, GenerationRecorder, measure_generation

EOS, PAD = 0, 1
VOCAB = {2: "a", 3: "b", 4: "\n", 5: "User", 6: ":", EOS: "<eos>", PAD: "<pad>"}


def decode(toks):
    return "".join(VOCAB[t] for t in toks)


def measure(tokens, budget=8, stops=()):
    return measure_generation(tokens, budget=budget, eos_ids=[EOS], pad_id=PAD, stop_strings=stops, decode=decode)


def test_eos_counts_up_to_and_including_eos():
    assert measure([2, 3, EOS, PAD, PAD, PAD, PAD, PAD]) == GenerationRecord(3, False)


def test_full_budget_without_stop_is_truncated():
    assert measure([2, 3, 2, 3, 2, 3, 2, 3]) == GenerationRecord(8, True)


def test_short_row_without_stop_is_not_truncated():
    # a row shorter than the budget ended for another reason (e.g. the context limit)
    assert measure([2, 3, 2]) == GenerationRecord(3, False)


def test_stop_string_spanning_tokens_ends_the_output():
    row = [2, 4, 5, 6, 2, 2, 2, 2]  # "a\nUser:aaaa"
    assert measure(row, stops=["\nUser:"]) == GenerationRecord(4, False)


def test_trailing_padding_after_a_stop_criterion_is_not_output():
    assert measure([2, 3, 2, PAD, PAD, PAD, PAD, PAD]) == GenerationRecord(3, False)


def test_recorder_is_first_in_first_out_per_text():
    rec = GenerationRecorder()
    rec.add("x", GenerationRecord(3, False))
    rec.add("x", GenerationRecord(5, True))
    assert rec.take("x") == GenerationRecord(3, False)
    assert rec.take("x") == GenerationRecord(5, True)
    assert rec.take("x") is None
