"""MBPP+ v0.2.0 (378 tasks) derived from the shipped v0.1.0 file (399 tasks), as EvalPlus derived it.

EvalPlus made v0.2.0 from v0.1.0 with one published script, ``tools/mbpp/fix_v010.py`` in evalplus/evalplus
(added in 5be984c, used by 3de2268 "feat(mbpp+): upgrade to v0.2.0 from v0.1.0"; evalplus issues 156 and
147): it removes a reference URL from 18 prompts and deletes 21 tasks with broken tests, each step guarded
by a check that the row at that index is the expected task. :data:`URL_STRIPS` and :data:`DELETED` declare
the same steps as data; :func:`upgrade` applies them and fails loudly (DataError) on a source that does not
line up, including a URL that is not in the prompt (the original's ``str.replace`` would skip it silently).

Only ``prompt`` changes, so DARE's own prompt format (the older one, without EvalPlus's example assert)
is kept; every other field then equals the release v0.2.0 row (checked by ``python -m
dare.harness.generators.evalplus --mbppplus-release``).

    python -m dare.harness.generators.evalplus      # rewrites harness/data/mbppplus.jsonl from mbppplus_v0.1.0.jsonl
"""

from __future__ import annotations

from ..errors import DataError

SOURCE_FILE = "mbppplus_v0.1.0.jsonl"
TARGET_FILE = "mbppplus.jsonl"
SOURCE_ROWS, TARGET_ROWS = 399, 378

_GFG, _W3 = "https://www.geeksforgeeks.org/", "https://www.w3resource.com/python-exercises/"

# (row index in v0.1.0, task id, URL removed from its prompt): evalplus/evalplus tools/mbpp/fix_v010.py.
URL_STRIPS: tuple[tuple[int, str, str], ...] = (
    (334, "Mbpp/734", _GFG + "sum-of-products-of-all-possible-subarrays/"),
    (335, "Mbpp/735", _GFG + "toggle-bits-number-expect-first-last-bits/"),
    (336, "Mbpp/736", _W3 + "data-structures-and-algorithms/python-data-structure-exercise-24.php"),
    (338, "Mbpp/739", _GFG + "index-of-smallest-triangular-number-with-n-digits/"),
    (339, "Mbpp/740", _GFG + "python-convert-tuple-to-adjacent-pair-dictionary/"),
    (342, "Mbpp/743", _GFG + "python-program-right-rotate-list-n/"),
    (344, "Mbpp/745", _W3 + "lambda/python-lambda-exercise-24.php"),
    (347, "Mbpp/749", _GFG + "python-sort-numeric-strings-in-a-list/"),
    (349, "Mbpp/751", _GFG + "how-to-check-if-a-given-array-represents-a-binary-heap/"),
    (350, "Mbpp/752", _GFG + "jacobsthal-and-jacobsthal-lucas-numbers/"),
    (351, "Mbpp/753", _GFG + "python-find-minimum-k-records-from-tuple-list/"),
    (354, "Mbpp/757", _GFG + "python-program-to-count-the-pairs-of-reverse-strings/"),
    (359, "Mbpp/763", _GFG + "find-minimum-difference-pair/"),
    (366, "Mbpp/771", _GFG + "check-for-balanced-parentheses-in-an-expression/"),
    (372, "Mbpp/780", _GFG + "python-combinations-of-sum-with-tuples-in-tuple-list/"),
    (373, "Mbpp/781", _W3 + "basic/python-basic-1-exercise-24.php"),
    (374, "Mbpp/782", _GFG + "sum-of-all-odd-length-subarrays/"),
    (392, "Mbpp/803", _GFG + "check-if-given-number-is-perfect-square-in-cpp/"),
)

# (row index in v0.1.0, task id) of the deleted tasks: the same script (evalplus issue 147, broken tests).
DELETED: tuple[tuple[int, str], ...] = (
    (37, "Mbpp/83"), (65, "Mbpp/115"), (67, "Mbpp/117"), (89, "Mbpp/143"), (94, "Mbpp/164"), (107, "Mbpp/229"),
    (121, "Mbpp/249"), (160, "Mbpp/295"), (180, "Mbpp/396"), (183, "Mbpp/400"), (187, "Mbpp/407"),
    (206, "Mbpp/431"), (212, "Mbpp/438"), (216, "Mbpp/442"), (231, "Mbpp/461"), (263, "Mbpp/574"),
    (270, "Mbpp/582"), (282, "Mbpp/595"), (318, "Mbpp/640"), (345, "Mbpp/746"), (375, "Mbpp/783"),
)


def _expect_task(rows: list[dict], index: int, task_id: str) -> None:
    found = rows[index].get("id") if 0 <= index < len(rows) else None
    if found != task_id:
        raise DataError(f"MBPP+ v0.1.0 row {index} is {found!r}, not {task_id}: this is not the v0.1.0 task list")


def upgrade(rows: list[dict]) -> list[dict]:
    """v0.2.0 rows (new dicts; ``rows`` is left as it is) from the 399 v0.1.0 rows in release order."""
    if len(rows) != SOURCE_ROWS:
        raise DataError(f"MBPP+ v0.1.0 has {SOURCE_ROWS} tasks, got {len(rows)}")
    out = [dict(row) for row in rows]
    for index, task_id, url in URL_STRIPS:
        _expect_task(out, index, task_id)
        if url not in out[index]["prompt"]:
            raise DataError(f"{task_id}: its prompt does not contain {url}")
        out[index]["prompt"] = out[index]["prompt"].replace(url, "")
    for index, task_id in DELETED:
        _expect_task(out, index, task_id)
    gone = {index for index, _ in DELETED}
    kept = [row for index, row in enumerate(out) if index not in gone]
    assert len(kept) == TARGET_ROWS  # 399 - 21, both tables being fixed
    return kept
