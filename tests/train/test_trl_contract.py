"""The installed TRL still has every hook the trainer overrides, with the same parameters."""

import pytest

from sagc.train.trl_contract import ATTRIBUTES, HOOKS, check_contract, overridden_methods


def test_installed_trl_keeps_every_hook():
    problems = check_contract()
    assert not problems, "TRL changed under the trainer:\n" + "\n".join(problems)


def test_every_override_of_the_trainer_is_listed():
    from trl import GRPOTrainer

    from sagc.train.trainer import SAGCGRPOTrainer

    listed = {h.name for h in HOOKS}
    unlisted = overridden_methods(SAGCGRPOTrainer, GRPOTrainer) - listed
    assert not unlisted, f"SAGCGRPOTrainer overrides TRL methods not in sagc.train.trl_contract.HOOKS: {unlisted}"


def _trl_without(name: str, **replace):
    """A stand-in for a future TRL: the installed GRPOTrainer with one hook removed or
    re-declared (its other methods and source are the real ones)."""
    from trl import GRPOTrainer

    namespace = {n: getattr(GRPOTrainer, n) for n in (h.name for h in HOOKS) if n != name}
    namespace.update(replace)
    namespace[name] = replace.get(name)
    cls = type("FutureGRPOTrainer", (), namespace)
    return cls


@pytest.mark.parametrize("hook", ["_generate", "_calculate_rewards", "_save_checkpoint"])
def test_a_missing_hook_is_named(hook):
    problems = check_contract(_trl_without(hook))
    assert any(p.startswith(f"TRL hook {hook}: FutureGRPOTrainer has no such method") for p in problems), problems


def test_a_changed_signature_is_named():
    def _generate(self, prompts, images):  # TRL grew a parameter
        raise NotImplementedError

    problems = check_contract(_trl_without("_generate", _generate=_generate))
    assert any(p.startswith("TRL hook _generate: parameters are now ('prompts', 'images')") for p in problems)


def test_attributes_are_checked_against_trl_source():
    assert "num_generations" in ATTRIBUTES
    problems = check_contract(_trl_without("_generate"))  # a class with no source of its own
    assert any(p.startswith("TRL attribute num_generations") for p in problems)
