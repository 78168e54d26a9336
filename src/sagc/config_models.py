"""Building blocks of the typed configs: value types that carry the words of their error
message, and pydantic's errors as one message naming the dotted key, the value and what was
expected (``train.steps must be a positive integer, got 0``).
"""

import typing
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WrapValidator
from pydantic.fields import FieldInfo


class Expect(str):
    """Annotation metadata: what a value must be, as an error message says it
    (``train.steps must be a positive integer, got 0``)."""


def _keep_int(value: Any, handler: Any) -> Any:
    """A number key keeps an integer as given (``139``, not ``139.0``): a cell's config
    fingerprint is its JSON."""
    out = handler(value)
    return value if type(value) is int else out


def Number(**bounds: float) -> Any:
    """A finite int or float (not a bool, not a numeric string) within ``bounds`` (gt/ge/le)."""
    return Annotated[float, Field(strict=True, allow_inf_nan=False, **bounds), WrapValidator(_keep_int)]


def OneOf(values: tuple[str, ...]) -> Any:
    return Annotated[Literal[values], Expect(f"one of {list(values)}")]


PositiveInt = Annotated[int, Field(strict=True, ge=1), Expect("a positive integer")]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0), Expect("a non-negative integer")]
Integer = Annotated[int, Field(strict=True), Expect("an integer")]
Flag = Annotated[bool, Field(strict=True), Expect("true or false")]
Text = Annotated[str, Field(strict=True, min_length=1), Expect("a non-empty string")]


#: What a value must be, by pydantic error type, for keys whose type carries no ``Expect``.
_WORDS = {
    "float_type": "a finite number",
    "finite_number": "a finite number",
    "int_type": "an integer",
    "bool_type": "true or false",
    "string_type": "a string",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "tuple_type": "a list",
    "list_type": "a list",
}
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (also through ``Optional``), else ``None``."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _field_at(model: type[BaseModel] | None, loc: tuple) -> tuple[FieldInfo | None, int]:
    """The innermost field ``loc`` names, and how many parts of ``loc`` lead to it."""
    info, depth = None, 0
    while depth < len(loc) and model is not None and loc[depth] in model.model_fields:
        info = model.model_fields[loc[depth]]
        model, depth = model_in(info.annotation), depth + 1
    return info, depth


def _expectation(info: FieldInfo) -> str | None:
    def find(items: Any) -> str | None:
        for item in items:
            if isinstance(item, Expect):
                return str(item)
            if (found := find(typing.get_args(item))) is not None:
                return found
        return None

    return find(info.metadata) or find(typing.get_args(info.annotation))


def _dotted(loc: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def describe(err: ValidationError, model: type[BaseModel], prefix: tuple = ()) -> str:
    """``err`` as one message, a clause per problem."""
    return "; ".join(clauses(err, model, prefix))


def clauses(err: ValidationError, model: type[BaseModel], prefix: tuple = ()) -> list[str]:
    """``describe``'s clauses, one per problem, without repeats."""
    out: list[str] = []
    unknown: dict[tuple, list[str]] = {}
    errors = err.errors(include_url=False)
    for e in errors:
        loc, kind = tuple(e["loc"]), e["type"]
        if kind == "too_short" and any(tuple(o["loc"])[: len(loc)] == loc and len(o["loc"]) > len(loc) for o in errors):
            continue  # a list whose items failed counts as too short too: the items' errors say why
        if kind == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        if kind in ("value_error", "assertion_error"):
            msg, key = str(e["ctx"]["error"]), _dotted(prefix + loc)
            if loc and isinstance(loc[-1], str) and msg.startswith(f"{loc[-1]} "):
                msg = key + msg[len(loc[-1]) :]  # a field's name, as a dotted key
            elif loc and str(loc[-1]) not in msg:
                msg = f"{key}: {msg}"  # a validator that does not know its key
            out.append(msg)
            continue
        if kind == "missing":
            out.append(f"{_dotted(prefix + loc)} is required")
            continue
        info, depth = _field_at(model, loc)
        words = _expectation(info) if info is not None and all(isinstance(p, int) for p in loc[depth:]) else None
        if words is not None:
            loc = loc[:depth]  # "train.stop must be a list of ..." rather than "train.stop[0] ..."
        elif kind == "literal_error":
            words = f"one of {e['ctx']['expected']}"
        elif kind in _BOUNDS:
            name, sign = _BOUNDS[kind]
            words = f"{sign} {e['ctx'][name]}"
        else:
            words = _WORDS.get(kind)
        key = _dotted(prefix + loc)
        out.append(f"{key} must be {words}, got {e['input']!r}" if words else f"{key}: {e['msg']}")
    for parent, keys in unknown.items():
        owner = model_in(_field_at(model, parent)[0].annotation) if parent else model
        allowed = f" (allowed: {sorted(owner.model_fields)})" if owner is not None else ""
        where = _dotted(prefix + parent)
        if where:
            out.append(f"unknown key(s) in {where}: {', '.join(f'{where}.{k}' for k in keys)}{allowed}")
        else:
            out.append(f"unknown top-level key(s): {', '.join(keys)}{allowed}")
    return list(dict.fromkeys(out))


class Section(BaseModel):
    """A frozen, typed block of a cell config that refuses unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: The block's key in a cell config: the prefix of its keys in error messages.
    section_key: ClassVar[str] = ""

    @classmethod
    def from_dict(cls, d: Any):
        """The block from its mapping (``None``: every default); ``ValueError`` naming the dotted key."""
        try:
            return cls.model_validate({} if d is None else d)
        except ValidationError as err:
            raise ValueError(describe(err, cls, (cls.section_key,) if cls.section_key else ())) from None

    @classmethod
    def default(cls, key: str) -> Any:
        """The default of ``key`` (a tuple default as the list a config file writes)."""
        value = cls.model_fields[key].get_default(call_default_factory=True)
        return list(value) if isinstance(value, tuple) else value
