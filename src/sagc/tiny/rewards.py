"""Moved: the reward functions live in ``sagc.rewards`` (next to ``sagc.answers``); this
name stays importable for the tiny world's modules that still import it from here."""

from sagc.rewards import CORRECT_REWARD, FORMAT_REWARD, REWARD_FUNCS, correctness_reward, format_reward  # noqa: F401
