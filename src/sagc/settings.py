"""Settings declared once on a frozen dataclass, and the value check and schema block derived
from the declarations (docs/architecture.md, "Settings declared once").
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from sagc.config_models import describe


@cache
def declared(cls: type) -> dict[str, Any]:
    """Each field of the dataclass ``cls`` with its declared type, ``Annotated`` metadata
    included (resolved once: under ``from __future__ import annotations`` they are strings)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def is_settings(hint: Any) -> bool:
    """Whether a field's type is itself a settings class (a dataclass): its keys are its own."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


@cache
def _values_model(cls: type) -> type[BaseModel]:
    """A pydantic model of the declared fields of ``cls`` (nested settings classes left out)."""
    values = {key: (hint, ...) for key, hint in declared(cls).items() if not is_settings(hint)}
    return create_model(f"{cls.__name__}Values", __config__=ConfigDict(extra="forbid"), **values)


def check(config: Any, prefix: str) -> None:
    """Check (and normalise) every field of the frozen dataclass instance ``config`` against
    its declaration; ``ValueError`` naming ``<prefix>.<key>`` for a bad one."""
    model = _values_model(type(config))
    for key, hint in declared(type(config)).items():
        value = getattr(config, key)
        if is_settings(hint) and not isinstance(value, hint):
            raise ValueError(f"{prefix}.{key} must be a {hint.__name__}, got {value!r}")
    try:
        checked = model.model_validate({key: getattr(config, key) for key in model.model_fields})
    except ValidationError as err:
        raise ValueError(describe(err, model, (prefix,))) from None
    for key in model.model_fields:
        object.__setattr__(config, key, getattr(checked, key))


def block_model(
    cls: type, name: str, base: type[BaseModel] = BaseModel, exclude: tuple[str, ...] = (), doc: str | None = None
) -> type[BaseModel]:
    """The config block of the settings class ``cls`` as a pydantic model: every key optional
    (default ``None``), a nested settings class's keys in its place, ``exclude`` left out."""
    fields: dict[str, Any] = {}

    def add(c: type) -> None:
        for key, hint in declared(c).items():
            if is_settings(hint):
                add(hint)
            elif key not in exclude:
                if key in fields:
                    raise TypeError(f"{name}: key {key!r} is declared by two settings classes")
                fields[key] = (hint, None)

    add(cls)
    return create_model(name, __base__=base, __doc__=doc or cls.__doc__, **fields)
