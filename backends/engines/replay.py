"""The ``replay`` engine: scores completions produced by another tool.

The completions file is JSONL, one ``{"id": <sample id>, "completion": <text>}`` per line; several
lines with the same id are that sample's k generations, in file order. Every problem in the file
(malformed lines, unknown ids, samples without enough completions) is reported before anything is
scored. The model fingerprint is the file's sha256, so editing the file invalidates the cache.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

from dare.harness.engine import EngineBase, EngineContext, GenerationRequest
from dare.harness.errors import InputError
from dare.harness.options import Capabilities, DecoderInfo
from dare.harness.records import DecodingConfig, Generation, ModelInfo

MAX_LISTED = 5


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
    return ", ".join(items[:MAX_LISTED]) + more


class ReplayEngine(EngineBase):
    """Serves generations from a completions file instead of a model. It decodes nothing, so it reads
    no DecodingConfig field but k: a replay record holds no decoding settings it never used."""

    name = "replay"
    version = "1"
    capabilities = Capabilities(reads_completions=True, needs_checkpoint=False, decoding_defaults=True)

    def __init__(self, ctx: EngineContext):
        if ctx.completions is None:
            raise InputError("--backend replay needs --completions FILE (JSONL with id and completion per line)")
        super().__init__(ctx)
        self.path = ctx.completions
        self.completions, self.sha256 = self._read(self.path)

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, list[str]], str]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"completions file {path} does not exist") from None
        except OSError as exc:
            raise InputError(f"cannot read completions file {path}: {exc.strerror}") from None
        out: dict[str, list[str]] = defaultdict(list)
        problems: list[str] = []
        for lineno, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {lineno} is not JSON ({exc.msg})")
                continue
            if not isinstance(row, dict) or "id" not in row or "completion" not in row:
                problems.append(f"line {lineno} needs the keys 'id' and 'completion'")
            elif not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
                problems.append(f"line {lineno}: 'id' must be a string or integer")
            elif not isinstance(row["completion"], str):
                problems.append(f"line {lineno}: 'completion' must be a string")
            else:
                out[str(row["id"])].append(row["completion"])
        if problems:
            raise InputError(f"completions file {path}: {len(problems)} malformed line(s): {_listed(problems)}")
        if not out:
            raise InputError(f"completions file {path} holds no completions")
        return dict(out), hashlib.sha256(data).hexdigest()

    def decoding_defaults(self) -> dict:
        """k = the largest number of completions given for one sample."""
        return {"num_samples": max(len(v) for v in self.completions.values())}

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo:
        return DecoderInfo(name="replay", version=self.version, reads=frozenset(), catalog={"replay": frozenset()})

    def model_info(self) -> ModelInfo:
        return ModelInfo(name=self.ctx.model_name, fingerprint=f"replay-{self.sha256}",
                         fingerprint_parts={"completions_file": str(self.path), "sha256": self.sha256})

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        known = self.ctx.sample_ids or {r.sample_id for r in requests}
        unknown = sorted(set(self.completions) - set(known))
        if unknown:
            raise InputError(f"completions file {self.path} has {len(unknown)} id(s) "
                             f"that are not samples of this suite: {_listed(unknown)}")
        missing = sorted({r.sample_id for r in requests if len(self.completions.get(r.sample_id, ())) <= r.index})
        if missing:
            raise InputError(
                f"completions file {self.path} lacks completions for {len(missing)} sample(s) "
                f"(each needs {decoding.num_samples}): {_listed(missing)}; add them or use --limit"
            )

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        return [Generation(sample_id=r.sample_id, index=r.index, text=self.completions[r.sample_id][r.index],
                           finish_reason="replay")
                for r in requests]
