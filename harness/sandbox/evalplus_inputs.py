"""MBPP+ inputs as EvalPlus passes them: which tasks get tuples, sets or complex numbers, and at what depth.

The MBPP+ release files store every input as JSON, which has no tuple, set or complex number. EvalPlus
rebuilds them with a per-task table: ``mbpp_deserialize_inputs`` in ``evalplus/data/mbpp.py`` of evalplus
0.3.1 (the same table is at evalplus/evalplus@26d6d00). :data:`MBPP_RULES` declares that table as data,
task number -> :class:`Rule`, so a reference and a candidate are called with the arguments EvalPlus gives
them, types included at every depth. Tasks absent from the table take their JSON arguments unchanged.

HumanEval+ needs no such step: EvalPlus passes its JSON inputs as they are (``get_human_eval_plus``).

Two quirks are EvalPlus's and kept on purpose, because the expected outputs come from them: Mbpp/115 turns
an empty (or non-list) item into ``{}``, an empty *dict*; and a rule that names leading positions keeps
only those arguments. EvalPlus sometimes returns the argument sequence itself as a tuple (124, 580, 615,
791); it is always splatted into the call (``fn(*inp)``), so here it is always a list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import DataError

Convert = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def _each(convert: Convert) -> Convert:
    """A list argument whose items are converted; the argument stays a list."""
    return lambda value: [convert(item) for item in value]


def _tuple_of(convert: Convert) -> Convert:
    """An argument that becomes a tuple of its converted items."""
    return lambda value: tuple(convert(item) for item in value)


def _tuple_if_list(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _deep_tuple(value: Any) -> Any:
    return tuple(_deep_tuple(item) for item in value) if isinstance(value, list) else value


def _set_or_empty_dict(item: Any) -> Any:
    # EvalPlus writes `{}` for an empty item: an empty dict, which the reference then receives.
    return set(item) if isinstance(item, list) and len(item) else {}


def _dict_values_tuple(value: dict) -> dict:
    return {key: tuple(item) for key, item in value.items()}


@dataclasses.dataclass(frozen=True)
class Rule:
    """How one task's JSON argument list becomes the call's arguments.

    ``every`` converts each argument. Otherwise ``leading`` converts the first arguments one each, and the
    result has exactly those (EvalPlus builds a fixed-length list), plus the rest unchanged if ``keep_rest``.
    """

    every: Convert | None = None
    leading: tuple[Convert, ...] = ()
    keep_rest: bool = False

    def apply(self, args: list) -> list:
        if self.every is not None:
            return [self.every(arg) for arg in args]
        if len(args) < len(self.leading):
            raise ValueError(f"{len(args)} arguments, the rule converts {len(self.leading)}")
        head = [convert(arg) for convert, arg in zip(self.leading, args)]
        return head + list(args[len(self.leading):]) if self.keep_rest else head


# Task numbers per rule, as listed in evalplus 0.3.1 evalplus/data/mbpp.py (mbpp_deserialize_inputs).
_EACH_ARGUMENT_TUPLE = (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630,
                        726, 740, 744, 809)
_ITEMS_TUPLE = (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780)
_FIRST_ITEMS_TUPLE = (75, 413, 444, 753)
_SECOND_TUPLE = (106, 750)
_FIRST_TUPLE = (250, 405, 446, 617, 720, 763, 808)
_TUPLE_OF_TUPLES = (259, 401, 445)
_TUPLES_AT_EVERY_DEPTH = (580, 615, 791)

MBPP_RULES: dict[int, Rule] = {
    **dict.fromkeys(_EACH_ARGUMENT_TUPLE, Rule(every=tuple)),
    **dict.fromkeys(_ITEMS_TUPLE, Rule(every=_each(tuple))),
    **dict.fromkeys(_FIRST_ITEMS_TUPLE, Rule(leading=(_each(tuple), _same))),
    **dict.fromkeys(_SECOND_TUPLE, Rule(leading=(_same, tuple))),
    **dict.fromkeys(_FIRST_TUPLE, Rule(leading=(tuple, _same))),
    **dict.fromkeys(_TUPLE_OF_TUPLES, Rule(every=_tuple_of(tuple))),
    **dict.fromkeys(_TUPLES_AT_EVERY_DEPTH, Rule(every=_deep_tuple)),
    115: Rule(leading=(_each(_set_or_empty_dict),)),
    124: Rule(leading=(float, complex)),  # the release stores both as strings ("0", "1j")
    252: Rule(leading=(complex,)),
    278: Rule(leading=(_tuple_of(_tuple_if_list),)),
    307: Rule(leading=(tuple, _same, _same)),
    722: Rule(leading=(_dict_values_tuple,), keep_rest=True),
}


def task_number(task_id: str) -> int:
    """``"Mbpp/2"`` -> 2."""
    try:
        return int(str(task_id).rsplit("/", 1)[-1])
    except ValueError:
        raise DataError(f"MBPP+ task id {task_id!r} does not end in a task number") from None


def mbpp_arguments(task_id: str, args: list) -> list:
    """The arguments EvalPlus calls MBPP+ task ``task_id`` with, for one JSON input ``args``."""
    rule = MBPP_RULES.get(task_number(task_id))
    if rule is None:
        return list(args)
    try:
        return rule.apply(args)
    except (TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{task_id}: an input does not fit EvalPlus's rule for this task: {exc}") from None
