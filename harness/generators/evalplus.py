"""The shipped EvalPlus sets, rebuilt from their release files: HumanEval+ v0.1.10 and MBPP+ v0.2.0.

* ``humanevalplus.jsonl``: the 164 rows of EvalPlus's HumanEval+ v0.1.10 release file
  (evalplus/humanevalplus_release@200defc, ``HumanEvalPlus.jsonl.gz``), in DARE's row format
  (:data:`HUMANEVALPLUS_FIELDS`). Not shipped as such: pass it with ``--humanevalplus``.
* ``mbppplus.jsonl``: MBPP+ v0.2.0, derived from the shipped ``mbppplus_v0.1.0.jsonl`` by EvalPlus's own
  published steps (:mod:`.mbppplus_v020`). ``--mbppplus-release`` checks the result against the v0.2.0
  release file (evalplus/mbppplus_release@64fc419, ``MbppPlus.jsonl.gz``): every field but ``prompt``
  equal, since DARE keeps its own prompt format.

No expected outputs are stored: as EvalPlus does, the verifier computes them by running the canonical
solution on each input (``dare.harness.sandbox.datasets``).

    python -m dare.harness.generators.evalplus [--humanevalplus HumanEvalPlus.jsonl.gz]
                                               [--mbppplus-release MbppPlus.jsonl.gz] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path

from ..errors import DataError
from . import mbppplus_v020

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
HUMANEVALPLUS_FILE, HUMANEVALPLUS_ROWS = "humanevalplus.jsonl", 164

# DARE field -> release field, in DARE's row order. `answer` repeats the reference solution, as every
# DARE code set does; MBPP+'s original asserts are `assertion` in the release and `test` in DARE.
HUMANEVALPLUS_FIELDS = {"id": "task_id", "prompt": "prompt", "answer": "canonical_solution",
                        "entry_point": "entry_point", "canonical_solution": "canonical_solution", "test": "test",
                        "base_input": "base_input", "plus_input": "plus_input", "atol": "atol",
                        "contract": "contract"}
MBPPPLUS_FIELDS = {**HUMANEVALPLUS_FIELDS, "test": "assertion"}


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a ``.jsonl`` or ``.jsonl.gz`` file."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def write_jsonl(rows: list[dict], path: Path) -> str:
    """Write ``rows`` the way every shipped file is written (UTF-8, one ``json.dumps`` per line); its sha256."""
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def dare_row(release_row: dict, fields: dict[str, str]) -> dict:
    missing = sorted(set(fields.values()) - set(release_row))
    if missing:
        raise DataError(f"release row {release_row.get('task_id')!r} lacks {', '.join(missing)}")
    return {ours: release_row[theirs] for ours, theirs in fields.items()}


def humanevalplus_rows(release_rows: list[dict]) -> list[dict]:
    """DARE's rows of the HumanEval+ v0.1.10 release, in release order."""
    if len(release_rows) != HUMANEVALPLUS_ROWS:
        raise DataError(f"HumanEval+ v0.1.10 has {HUMANEVALPLUS_ROWS} tasks, got {len(release_rows)}")
    return [dare_row(row, HUMANEVALPLUS_FIELDS) for row in release_rows]


def mbppplus_rows(data_dir: Path = DATA_DIR) -> list[dict]:
    """MBPP+ v0.2.0 in DARE's format, from the v0.1.0 file in ``data_dir``."""
    return mbppplus_v020.upgrade(read_jsonl(data_dir / mbppplus_v020.SOURCE_FILE))


def differences_from_release(rows: list[dict], release_rows: list[dict], fields: dict[str, str],
                             ignore: tuple[str, ...] = ("prompt",)) -> list[str]:
    """``"task: field"`` for every DARE field that differs from the release row (task order included)."""
    if [r["id"] for r in rows] != [r["task_id"] for r in release_rows]:
        return ["the task ids or their order differ"]
    return [f"{row['id']}: {ours}" for row, theirs in zip(rows, release_rows) for ours, field in fields.items()
            if ours not in ignore and row[ours] != theirs[field]]


def main(argv: list[str] | None = None) -> int:
    from ..cliutil import emit

    parser = argparse.ArgumentParser(prog="python -m dare.harness.generators.evalplus",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder (default: the shipped data folder)")
    parser.add_argument("--humanevalplus", type=Path, help="HumanEval+ v0.1.10 release file (.jsonl or .jsonl.gz)")
    parser.add_argument("--mbppplus-release", type=Path, help="MBPP+ v0.2.0 release file, to check against")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    mbpp = mbppplus_rows()
    if args.mbppplus_release:
        problems = differences_from_release(mbpp, read_jsonl(args.mbppplus_release), MBPPPLUS_FIELDS)
        if problems:
            raise DataError(f"MBPP+ v0.2.0 differs from the release: {'; '.join(problems[:10])}")
    emit(f"{write_jsonl(mbpp, args.out / mbppplus_v020.TARGET_FILE)}  {mbppplus_v020.TARGET_FILE}")
    if args.humanevalplus:
        rows = humanevalplus_rows(read_jsonl(args.humanevalplus))
        emit(f"{write_jsonl(rows, args.out / HUMANEVALPLUS_FILE)}  {HUMANEVALPLUS_FILE}")  # MANIFEST lines
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
