"""Memoising a function of a checked pipeline config on its content: once per Snakefile parse."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


def per_config(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn(config, *args)`` memoised on ``config``'s content and ``args`` (the last 16); the result
    is shared: treat it as read-only."""
    memo: dict[str, T] = {}

    @functools.wraps(fn)
    def wrapper(config: BaseModel, *args: Any) -> T:
        stated = config.model_dump(mode="json", exclude_unset=True)  # what its cells carry
        try:
            key = json.dumps([stated, args], sort_keys=True, default=repr)
        except TypeError:  # keys of mixed types cannot be sorted: no memo
            return fn(config, *args)
        if key not in memo:
            if len(memo) >= 16:
                del memo[next(iter(memo))]
            memo[key] = fn(config, *args)
        return memo[key]

    return wrapper
