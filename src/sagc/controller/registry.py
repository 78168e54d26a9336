"""Group-size policies by sizing name (``g<N>``, ``<policy>``, ``<policy>-<variant>``): the one
place that parses a sizing. Name forms, config blocks, adding a policy: docs/controller.md,
"Sizing names and the policy registry".
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sagc.controller.sagc import FixedGroupSize, GroupSizer, SAGCConfig, SAGCController

#: A variant's name (the part after ``<policy>-``): letters, digits and underscores.
VARIANT_PATTERN = r"[A-Za-z0-9_]+"

#: What a fixed-G sizing takes from the SAGC block: how a straggler is measured, nothing else.
MEASUREMENT_KEYS = ("tau", "scope")

#: The config block the fixed baseline's measurement keys come from.
MEASUREMENT_BLOCK = "sagc"

_FIXED = re.compile(r"^g([0-9]+)$")


@dataclass(frozen=True, init=False)
class Policy:
    """A registered family of sizings: its base name, config block (``config`` validates it),
    ``build(config)``, and ``inherits``, a block whose keys the policy's block starts from.
    ``config`` and ``build`` may be ``"module:name"`` strings, imported when first used."""

    name: str
    block: str
    inherits: str | None
    _config: type | str
    _build: Callable[[Any], GroupSizer] | str

    def __init__(
        self,
        name: str,
        block: str,
        config: type | str,
        build: Callable[[Any], GroupSizer] | str,
        inherits: str | None = None,
    ) -> None:
        # Frozen: assigned once, here; ``config`` and ``build`` resolve the refs on access.
        for key, value in (("name", name), ("block", block), ("inherits", inherits),
                           ("_config", config), ("_build", build)):  # fmt: skip
            object.__setattr__(self, key, value)

    @property
    def config(self) -> type:
        return _resolve(self._config)

    @property
    def build(self) -> Callable[[Any], GroupSizer]:
        return _resolve(self._build)

    @property
    def variants_block(self) -> str:
        return f"{self.block}_variants"


def _resolve(ref: Any) -> Any:
    """``ref`` itself, or the object a ``"module:name"`` string names."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


#: Every policy besides the fixed baseline, by base name. Adding one is one line here.
POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("sagc", block="sagc", config=SAGCConfig, build=SAGCController),
        # Prompt-aware: tail batching + one SAGC per round kind (sagc.prompt_aware, which
        # imports the controller: named, not imported).
        Policy(
            "sagc-prompt",
            block="sagc_prompt",
            config="sagc.prompt_aware.config:PromptSAGCConfig",
            build="sagc.prompt_aware.policy:build_prompt_sagc",
            inherits="sagc",
        ),
        # Rule-based baselines (sagc.controller.rules): SAGC's candidates, tau and delta.
        Policy(
            "aimd",
            block="aimd",
            config="sagc.controller.rules:AIMDConfig",
            build="sagc.controller.rules:AIMDRule",
            inherits="sagc",
        ),
        Policy(
            "threshold",
            block="threshold",
            config="sagc.controller.rules:ThresholdConfig",
            build="sagc.controller.rules:ThresholdRule",
            inherits="sagc",
        ),
    )
}


def register(policy: Policy) -> Policy:
    """Add a policy at run time (tests, plug-ins); the project's own are in ``POLICIES``."""
    if policy.name in POLICIES or _FIXED.match(policy.name):
        raise ValueError(f"sizing policy {policy.name!r} is already registered or clashes with 'g<N>'")
    POLICIES[policy.name] = policy
    return policy


def sizing_pattern() -> str:
    """The regular expression every sizing name matches (the pipeline schema's pattern)."""
    names = "|".join(re.escape(n) for n in sorted(POLICIES, key=len, reverse=True))
    return f"^(g[0-9]+|({names})(-{VARIANT_PATTERN})?)$"


def expected_forms() -> str:
    names = sorted(POLICIES)
    return "'g<N>' (e.g. 'g16'), " + ", ".join(f"'{n}' or '{n}-<variant>'" for n in names)


@dataclass(frozen=True)
class Sizing:
    """A parsed sizing name: a fixed G, or a policy and an optional variant."""

    name: str
    fixed: int | None = None
    policy: Policy | None = None
    variant: str | None = None

    @property
    def is_fixed(self) -> bool:
        return self.fixed is not None

    @property
    def block(self) -> str:
        """The config block this sizing reads (a fixed G: the SAGC block's measurement keys)."""
        return MEASUREMENT_BLOCK if self.policy is None else self.policy.block

    @property
    def config_class(self) -> type:
        """The typed config class of the block (``SAGCConfig`` for SAGC and fixed G)."""
        return SAGCConfig if self.policy is None else self.policy.config

    def cell_block(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A cell's block from a pipeline config: the inherited block, the policy's, then the
        variant's overrides (``ValueError`` if unknown); a fixed G gets the measurement keys."""
        if self.policy is None:
            return {k: v for k, v in dict(config.get(MEASUREMENT_BLOCK) or {}).items() if k in MEASUREMENT_KEYS}
        p = self.policy
        block = dict(config.get(p.inherits) or {}) if p.inherits else {}
        block.update(config.get(p.block) or {})
        if self.variant is not None:
            variants = config.get(p.variants_block) or {}
            if self.variant not in variants:
                raise ValueError(
                    f"'{self.name}' needs '{p.variants_block}.{self.variant}' "
                    f"(known variants: {sorted(variants) or 'none'})"
                )
            block.update(variants[self.variant])
        return block

    def config(self, block: Mapping[str, Any] | Any = None, seed: int | None = None):
        """The typed config of the block (``ValueError`` when invalid); ``seed`` overrides it.
        A fixed G's is an ``SAGCConfig`` of which only the measurement keys count."""
        cls = self.config_class
        if isinstance(block, cls) and seed is None:
            return block
        if hasattr(block, "to_dict"):  # a typed config (e.g. the simulator's SAGCConfig)
            block = block.to_dict()
        d = dict(block or {})
        return cls.from_dict(d if seed is None else {**d, "seed": int(seed)})

    def group_sizes(self, block: Mapping[str, Any] | Any = None) -> tuple[int, ...]:
        """Every G this sizing can use, ascending."""
        if self.fixed is not None:
            return (self.fixed,)
        return tuple(self.config(block).sorted_candidates)

    def build(self, block: Mapping[str, Any] | Any = None, seed: int | None = None) -> GroupSizer:
        """The sizer of this sizing from its block (``seed`` overrides the block's)."""
        cfg = self.config(block, seed)
        if self.fixed is not None:
            return FixedGroupSize(self.fixed, tau=cfg.tau, scope=cfg.scope)
        return self.policy.build(cfg)


def parse_sizing(name: Any, key: str | None = None) -> Sizing:
    """Parse a sizing name; ``ValueError`` for anything else, worded ``<key> must be ...,
    got <name>`` when the caller names the config ``key``."""

    def fail(what: str) -> ValueError:
        if key is None:
            return ValueError(f"unknown sizing {name!r}: expected {what}")
        return ValueError(f"{key} must be {what}, got {name!r}")

    if not isinstance(name, str):
        raise fail(expected_forms())
    m = _FIXED.match(name)
    if m:
        g = int(m.group(1))
        if g < 2:
            raise fail("a group size >= 2 (a group of one has no advantage)")
        return Sizing(name, fixed=g)
    for base in sorted(POLICIES, key=len, reverse=True):
        if name == base:
            return Sizing(name, policy=POLICIES[base])
        if name.startswith(base + "-") and re.fullmatch(VARIANT_PATTERN, name[len(base) + 1 :]):
            return Sizing(name, policy=POLICIES[base], variant=name[len(base) + 1 :])
    raise fail(expected_forms())


def fixed_group_size(name: str) -> int | None:
    """G of a fixed sizing name (``"g16"`` -> 16), None for any other name."""
    m = _FIXED.match(name) if isinstance(name, str) else None
    return int(m.group(1)) if m else None


def measurement(config: Mapping[str, Any]) -> SAGCConfig:
    """How every cell of a pipeline config counts a straggler: its ``sagc`` block's
    measurement keys, ``SAGCConfig``'s defaults for the others."""
    block = config.get(MEASUREMENT_BLOCK) or {}
    return SAGCConfig.from_dict({k: v for k, v in block.items() if k in MEASUREMENT_KEYS})


def grid_group_sizes(sizings: Sequence[str], blocks: Mapping[str, Any]) -> tuple[int, ...]:
    """Every G that a pipeline config's ``sizings`` can choose (their blocks from ``blocks``), sorted."""
    parsed = [parse_sizing(s) for s in sizings]
    return tuple(sorted({g for s in parsed for g in s.group_sizes(s.cell_block(blocks))}))


def make_group_sizer(
    sizing: str, sagc: SAGCConfig | Mapping[str, Any] | None = None, seed: int | None = None
) -> GroupSizer:
    """Build the policy of a sizing name from its block, a variant's already merged (``seed``
    overrides the block's)."""
    return parse_sizing(sizing).build(sagc, seed)
