"""The shipped EvalPlus files are what their builder makes (dare.harness.generators.evalplus).

MBPP+ v0.2.0 is rebuilt here from the shipped v0.1.0 file. The release files themselves are not shipped;
point ``DARE_HUMANEVALPLUS_RELEASE`` / ``DARE_MBPPPLUS_RELEASE`` at HumanEvalPlus.jsonl(.gz) v0.1.10 and
MbppPlus.jsonl(.gz) v0.2.0 to also check the shipped files against them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dare.harness.data import DATA_DIR, load_rows, manifest
from dare.harness.errors import DataError
from dare.harness.generators import evalplus, mbppplus_v020


def release(variable: str) -> Path:
    path = os.environ.get(variable)
    if not path:
        pytest.skip(f"{variable} is not set")
    return Path(path)


def test_mbppplus_v020_is_rebuilt_byte_for_byte_from_v010(tmp_path):
    rows = evalplus.mbppplus_rows()
    assert len(rows) == 378
    assert evalplus.write_jsonl(rows, tmp_path / "mbppplus.jsonl") == manifest()["mbppplus.jsonl"]
    old = {r["id"]: r for r in load_rows(mbppplus_v020.SOURCE_FILE)}
    stripped = {task for _, task, _ in mbppplus_v020.URL_STRIPS}
    for row in rows:  # only the 18 prompts change, each by its URL alone
        before = old[row["id"]]
        assert {k: v for k, v in row.items() if k != "prompt"} == {k: v for k, v in before.items() if k != "prompt"}
        assert (row["prompt"] != before["prompt"]) == (row["id"] in stripped)
    assert not {task for _, task in mbppplus_v020.DELETED} & {r["id"] for r in rows}


@pytest.mark.parametrize("damage, message", [
    (lambda rows: rows.pop(40), "has 399 tasks"),
    (lambda rows: rows.insert(0, rows.pop(37)), "row 37 is"),
    (lambda rows: rows[334].update(prompt="no link"), "does not contain"),
])
def test_a_source_that_is_not_v010_fails_loudly(damage, message):
    rows = [dict(r) for r in load_rows(mbppplus_v020.SOURCE_FILE)]
    damage(rows)
    with pytest.raises(DataError, match=message):
        mbppplus_v020.upgrade(rows)


def test_shipped_mbppplus_equals_the_v020_release_but_for_prompts():
    theirs = evalplus.read_jsonl(release("DARE_MBPPPLUS_RELEASE"))
    assert evalplus.differences_from_release(list(load_rows("mbppplus.jsonl")), theirs, evalplus.MBPPPLUS_FIELDS) == []


def test_shipped_humanevalplus_is_rebuilt_from_the_release(tmp_path):
    rows = evalplus.humanevalplus_rows(evalplus.read_jsonl(release("DARE_HUMANEVALPLUS_RELEASE")))
    assert evalplus.write_jsonl(rows, tmp_path / "h.jsonl") == manifest()["humanevalplus.jsonl"]
    assert (DATA_DIR / "humanevalplus.jsonl").stat().st_size == (tmp_path / "h.jsonl").stat().st_size
