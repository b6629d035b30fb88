"""A session: one model, engine and decoding resolved from KEY=VALUE settings, decoding the prompts another
harness hands over.

The settings are ``dare-eval --set``'s (a DecodingConfig field, ``extra.OPTION``, ``engine.OPTION``) plus the
few things dare-eval takes as flags: ``model`` (a name or alias), ``model_path``, ``backend`` (the engine,
``--backend``), ``suite`` (whose per-suite settings of the model apply; default: the model's ``default``),
``device``, ``out`` (where run records go) and ``likelihood`` (the scoring estimator, default the model family's;
also spelt ``likelihood.estimator`` as in dare-eval; its options as ``likelihood.OPTION``). A harness's own
per-task settings (lm-eval's ``generation_kwargs``) come between the model's settings and the user's: the
user's explicit setting wins, and a task setting the decoder does not read is reset, as a model's is
(harness/resolve.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dare.harness.engine import EngineContext, GenerationRequest, generate, request_seed
from dare.harness.errors import ConfigError, EngineError
from dare.harness.likelihood import EstimatorInfo, LikelihoodRequest, LikelihoodResult
from dare.harness.models import resolve
from dare.harness.options import capabilities
from dare.harness.overrides import HOSTED
from dare.harness.plan import typed_engine_options
from dare.harness.records import Generation, Message
from dare.harness.registry import engines
from dare.harness.resolve import ResolvedDecoding, resolve_decoding

log = logging.getLogger(__name__)

#: settings that name the run rather than the decoding (dare-eval's flags)
RUN_KEYS = ("model", "model_path", "backend", "suite", "device", "out", "likelihood")


class Session:
    """``settings`` (KEY=VALUE pairs, already split by the calling harness; text values are read as --set
    reads them) resolved once: a bad one is a one-line :class:`ConfigError` naming ``source`` before any
    weights load."""

    def __init__(self, settings: dict[str, Any], source: str):
        run = {k: settings[k] for k in RUN_KEYS if k in settings}
        parsed = HOSTED.parse_pairs([(k, v) for k, v in settings.items() if k not in RUN_KEYS], source=source)
        if parsed.get("verifier"):
            raise ConfigError([f"verifier.{k}: the calling harness scores with its own metrics; drop it"
                               for k in parsed["verifier"]], source=source)
        self.source = source
        self.backend = str(run.get("backend", "torch"))
        self.suite = str(run.get("suite", "default"))
        self.out = Path(str(run.get("out", "runs")))
        self.user = dict(parsed.get("decoding", {}))
        engine_cls = engines.get(self.backend)
        model_path = str(run["model_path"]) if run.get("model_path") else None
        resolved = resolve(str(run["model"]) if run.get("model") else None, model_path,
                           capabilities(engine_cls).needs_checkpoint)
        self.model_name, self.spec = resolved.name, resolved.spec
        ctx = EngineContext(model_name=resolved.name, model_spec=resolved.spec, model_path=resolved.path,
                            device=str(run["device"]) if run.get("device") else None,
                            options=typed_engine_options(engine_cls, dict(parsed.get("engine", {})), source),
                            cache_dir=self.out / ".cache")
        self.engine = engine_cls(ctx)
        self._resolved: dict[str, ResolvedDecoding] = {}
        self._prepared: set[str] = set()
        self.decoding({})  # the user's settings checked now, before the harness loads any data
        options = dict(parsed.get("likelihood", {}))
        name = run.get("likelihood") or options.pop("estimator", None)  # dare-eval's likelihood.estimator=NAME too
        self._likelihood = (str(name) if name else None, options)
        self._estimator: EstimatorInfo | None = None
        if any(self._likelihood):
            self.estimator()  # likewise a named estimator and its options

    def estimator(self) -> EstimatorInfo:
        """The scoring estimator (resolved once), or a one-line ConfigError where the engine has none."""
        if self._estimator is None:
            if not capabilities(self.engine).likelihood:
                raise ConfigError(f"engine {self.engine.name} scores no likelihood (it declares no estimator); use "
                                  "backend=torch for loglikelihood tasks", source=self.source)
            try:
                self._estimator = self.engine.likelihood_estimator(*self._likelihood)
            except ConfigError as exc:  # the engine names no source: the settings came from ours
                raise ConfigError(exc.problems, source=self.source) from None
        return self._estimator

    def score(self, items: Sequence[tuple[str, int, str, str]], rolling: bool = False) -> list[LikelihoodResult]:
        """``log p(continuation | context)`` of each ``(sample_id, index, context, continuation)``, each with the
        seed ``request_seed(seed, sample_id, index)``, dare-eval's for choice ``index`` of question ``sample_id``
        (so the same question scores the same whichever harness sends it); ``rolling``: the whole text's (the
        context empty)."""
        seed = self.decoding({}).config.seed
        requests = [LikelihoodRequest(f"{sid}/{index}", context, continuation, request_seed(seed, sid, index))
                    for sid, index, context, continuation in items]
        score = self.engine.loglikelihood_rolling if rolling else self.engine.loglikelihood
        return score(requests, self.estimator())

    def decoding(self, task: dict[str, Any]) -> ResolvedDecoding:
        """The decoding for a task's own settings (DecodingConfig fields), under the user's."""
        key = json.dumps(task, sort_keys=True, default=str)
        if key not in self._resolved:
            self._resolved[key] = resolve_decoding(self.engine, self.spec, self.suite, {**task, **self.user},
                                                   explicit=set(self.user), source=self.source)
        return self._resolved[key]

    def generate(self, prompts: Sequence[tuple[str, Sequence[Message]]], run: ResolvedDecoding) -> list[Generation]:
        """One generation per ``(sample_id, messages)``, each with the seed ``request_seed(seed, sample_id, 0)``
        (so an output does not depend on what else is in the batch), in batches of ``batch_size``."""
        decoding = run.config
        requests = [GenerationRequest(sid, 0, tuple(messages), request_seed(decoding.seed, sid, 0))
                    for sid, messages in prompts]
        if decoding.config_hash() not in self._prepared:
            self.engine.prepare(requests, decoding)
            self._prepared.add(decoding.config_hash())
        out: list[Generation] = []
        for start in range(0, len(requests), decoding.batch_size):
            batch = requests[start:start + decoding.batch_size]
            generated = generate(self.engine, batch, decoding, run.decoder, run.options)
            if len(generated) != len(batch):
                raise EngineError(f"engine {self.engine.name} returned {len(generated)} generations "
                                  f"for {len(batch)} requests")
            out.extend(generated)
        return out


def cut_at(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the earliest of ``stops`` (a diffusion model fills its whole canvas; a stop sequence
    ends the answer where it first appears, as lm-eval's own models cut theirs)."""
    ends = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return text[:min(ends)] if ends else text
