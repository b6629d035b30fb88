"""Builds a PC-Sampler background table: token counts of the declared corpus under one tokenizer.

    python -m dare.backends.decoding.pc_background.build --tokenizer CHECKPOINT_DIR --label NAME --out FILE.json

The corpus is declared file by file in ``corpus_manifest.txt`` beside this module and every file is checked
against it before anything is counted, so a table is rebuilt byte for byte from the same corpus and tokenizer
(with the shipped file's ``--date``). It holds no evaluation data (README.md beside this module):

- ``gsm8k_train``: ``harness/data/gsm8k_train.jsonl`` (openai/grade-school-math, MIT), one text per row,
  ``f"{prompt} {solution} "`` as the authors' ``utils/calculate_p_baseline.py`` joins a row's fields;
- ``cpython-3.11.7-lib``: the top-level modules ``Lib/*.py`` of CPython 3.11.7 (PSF-2.0) less the build's
  generated ``_sysconfigdata_*``, one text per file: English docstrings and comments, and Python code.

Each text is counted as ``tokenizer.encode(text, add_special_tokens=False)``; the table keeps the authors'
keys (``num_token``, ``p_baseline_dict`` with string ids) plus the tokenizer's sha256, the corpus list and the
builder's version and date.

A run whose tokenizer has no shipped table (``pc_background=declared``) builds its own at plan time with
:func:`build`, labelled :func:`run_label` and dated :data:`RUN_BUILT` (fixed values, so the file and its
sha256 depend only on the tokenizer, the corpus and this builder): the same bytes as
``--label "tokenizer <first 12 hex of its sha256>" --date "plan time"`` here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterator
from datetime import date
from pathlib import Path

from dare.harness.data import DATA_DIR
from dare.harness.errors import DataError

from . import FORMAT, TABLES_DIR, tokenizer_sha256

log = logging.getLogger(__name__)

VERSION = "1"
MANIFEST = TABLES_DIR / "corpus_manifest.txt"
#: source -> (licence, what its texts are)
SOURCES = {
    "gsm8k_train": ("MIT (openai/grade-school-math)", "harness/data/gsm8k_train.jsonl, one text per row: "
                    "f'{prompt} {solution} '"),
    "cpython-3.11.7-lib": ("PSF-2.0 (CPython 3.11.7)", "Lib/*.py less _sysconfigdata_*, one text per file"),
}
ENCODE = "tokenizer.encode(text, add_special_tokens=False), counts summed over the texts"
BATCH = 256  # texts per tokenizer call: the fast tokenizer encodes a batch on all cores
#: the ``built`` of a table a run builds (a date for the shipped ones)
RUN_BUILT = "plan time"


def run_label(tokenizer_digest: str) -> str:
    """The ``tokenizer`` of a table a run builds: its hash, not a checkpoint path that differs by machine."""
    return f"tokenizer {tokenizer_digest[:12]}"


def cache_name(tokenizer_digest: str) -> str:
    """The file name of a table a run builds: tokenizer hash, manifest hash and builder version, so a changed
    corpus or builder is a new file."""
    manifest = hashlib.sha256(MANIFEST.read_bytes()).hexdigest()
    return f"{tokenizer_digest[:16]}-corpus{manifest[:12]}-v{VERSION}.json"


def declared() -> dict[str, list[tuple[str, str]]]:
    """Source -> [(relative path, sha256)] as ``corpus_manifest.txt`` lists them (``<sha256>  <source>/<path>``)."""
    out: dict[str, list[tuple[str, str]]] = {name: [] for name in SOURCES}
    for line in MANIFEST.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        source, relative = name.split("/", 1)
        out[source].append((relative, digest))
    return out


def _roots(stdlib: Path | None) -> dict[str, Path]:
    return {"gsm8k_train": DATA_DIR, "cpython-3.11.7-lib": stdlib or Path(sysconfig.get_paths()["stdlib"])}


def _verified(source: str, root: Path, relative: str, digest: str) -> bytes:
    path = root / relative
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"corpus file {source}/{relative} cannot be read at {path} ({exc.strerror})") from None
    if hashlib.sha256(raw).hexdigest() != digest:
        hint = (f" (this Python is {sys.version.split()[0]}; pass --stdlib with CPython 3.11.7's Lib/)"
                if source.startswith("cpython") else "")
        raise DataError(f"corpus file {path} differs from the declared corpus (corpus_manifest.txt){hint}")
    return raw


def texts(source: str, raw: bytes) -> Iterator[str]:
    """The texts one corpus file contributes."""
    if source == "gsm8k_train":
        for line in filter(None, raw.decode("utf-8").split("\n")):  # not splitlines: rows hold U+2028
            row = json.loads(line)
            yield f"{row['prompt']} {row['solution']} "
    else:
        yield raw.decode("utf-8")


def count(tok, stdlib: Path | None = None) -> tuple[Counter, list[dict]]:
    """Token counts of the declared corpus under ``tok`` and the corpus list the table records. Every file is
    checked before the first is counted (counting takes tens of seconds)."""
    roots = _roots(stdlib)
    files = {source: [(relative, digest, _verified(source, roots[source], relative, digest))
                      for relative, digest in listed] for source, listed in declared().items()}
    counts: Counter = Counter()
    corpus = []
    for source, entries in files.items():
        before = sum(counts.values())
        for _, _, raw in entries:
            batch = list(texts(source, raw))
            for start in range(0, len(batch), BATCH):
                for ids in tok(batch[start:start + BATCH], add_special_tokens=False, verbose=False)["input_ids"]:
                    counts.update(ids)
        listing = "".join(f"{digest}  {source}/{relative}\n" for relative, digest, _ in entries)
        licence, what = SOURCES[source]
        corpus.append({"name": source, "licence": licence, "texts": what, "files": len(entries),
                       "bytes": sum(len(raw) for _, _, raw in entries), "tokens": sum(counts.values()) - before,
                       "sha256": hashlib.sha256(listing.encode()).hexdigest()})
    return counts, corpus


def build(tok, label: str, built: str, stdlib: Path | None = None) -> bytes:
    """The table file's bytes: canonical JSON, ids in ascending order, one trailing newline."""
    counts, corpus = count(tok, stdlib)
    table = {"format": FORMAT, "tokenizer": label, "tokenizer_sha256": tokenizer_sha256(tok), "vocab_size": len(tok),
             "corpus": corpus, "encode": ENCODE, "builder": f"dare.backends.decoding.pc_background.build {VERSION}",
             "built": built, "num_token": sum(counts.values()),
             "p_baseline_dict": {str(i): counts[i] for i in sorted(counts)}}
    return (json.dumps(table, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    from dare.backends.models.tokenizer import load_tokenizer
    from dare.harness.cliutil import run_cli

    prog = "python -m dare.backends.decoding.pc_background.build"
    parser = argparse.ArgumentParser(prog=prog, description="Count the declared corpus under a tokenizer: a "
                                     "PC-Sampler background table.")
    parser.add_argument("--tokenizer", required=True, type=Path, help="checkpoint directory with the tokenizer")
    parser.add_argument("--out", required=True, type=Path, help="the table file to write (JSON)")
    parser.add_argument("--label", help="the tokenizer's name in the table (default: the directory's name)")
    parser.add_argument("--date", default=date.today().isoformat(), help="build date recorded (default: today)")
    parser.add_argument("--stdlib", type=Path, help="CPython 3.11.7's Lib/ (default: this interpreter's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def body() -> int:
        data = build(load_tokenizer(args.tokenizer), args.label or args.tokenizer.name, args.date, args.stdlib)
        args.out.write_bytes(data)
        log.info("wrote %s (%d bytes, sha256 %s)", args.out, len(data), hashlib.sha256(data).hexdigest())
        return 0

    return run_cli(prog, body)


if __name__ == "__main__":
    sys.exit(main())
