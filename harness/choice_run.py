"""Running a choice benchmark: the estimator resolved at plan time, scores cache-first, lm-eval's verdicts.

Per choice benchmark the plan fixes the few-shot count and the estimator, layered: the model's preset
(``likelihood:`` default, then the suite's, then the benchmark's entry), the suite's preset (``choice:``
default, then the benchmark's), then ``--set likelihood.estimator=NAME`` / ``likelihood.OPTION=V`` and
``--set choice.num_fewshot=N``. The engine validates the estimator (``engine.likelihood_estimator``).
Scores are cached under the model fingerprint, the estimator's identity and the engine's token identity, so
``mc_num`` 1 and 128 (or CFG 0 and 0.5) never share an entry; each batch is fsync'd before the next, so a
killed run resumes where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from . import config as cfg
from . import metrics as metric_lib
from . import stopping
from .cache import JsonlCache, cache_key
from .choice import FEWSHOT_SEED, ChoiceItem, build_items, verdict
from .data import load_rows, verified_path
from .engine import request_seed
from .errors import ConfigError, EngineError
from .likelihood import EstimatorInfo, LikelihoodRequest, LikelihoodResult
from .options import capabilities
from .records import BenchmarkInfo, Record, sha256_text

SCORER_VERSION = "1"  # of choice.verdict: bump when a verdict could change


@dataclass(frozen=True)
class ChoicePlan:
    num_fewshot: int
    estimator: EstimatorInfo
    chat_template: bool = False


def resolve_choices(engine: Any, model: cfg.ModelSpec | None, suite: cfg.SuiteSpec, likelihood: dict[str, Any],
                    choice: dict[str, Any]) -> dict[str, ChoicePlan]:
    """Each choice benchmark of ``suite``: its few-shot count and the estimator the engine resolved."""
    specs = [cfg.benchmark(b) for b in suite.benchmarks]
    wanted = [s for s in specs if s.task == "choice"]
    if not wanted:
        if likelihood or choice:
            raise ConfigError(f"suite {suite.name} has no likelihood-scored benchmark; drop likelihood.* and "
                              "choice.* settings", source="--set")
        return {}
    if not capabilities(engine).likelihood:
        raise ConfigError(f"engine {engine.name} does not score likelihood, which {wanted[0].name} needs; pick an "
                          "engine that declares it (dare-eval --list)")
    out = {}
    for spec in wanted:
        layers = [model.likelihood.get(k) for k in ("default", suite.name, spec.name)] if model else []
        layers += [suite.choice.get("default"), suite.choice.get(spec.name)]
        name, options, shots, chat = None, {}, spec.choice.num_fewshot, False
        for layer in filter(None, layers):
            name = layer.estimator or name
            options.update(layer.options)
            shots = shots if layer.num_fewshot is None else layer.num_fewshot
            chat = chat if layer.chat_template is None else layer.chat_template
        given = dict(likelihood)
        name = given.pop("estimator", name)
        options.update(given)
        shots = int(choice.get("num_fewshot", shots))
        chat = _flag(choice.get("chat_template", chat), "choice.chat_template")
        out[spec.name] = ChoicePlan(shots, engine.likelihood_estimator(name, options), chat)
    return out


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} is not a boolean; use {name}=true or {name}=false", source="--set")
    return value


class LikelihoodScore(Record):
    """A cached :class:`~dare.harness.likelihood.LikelihoodResult`."""

    logprob: float
    stderr: float = 0.0
    is_greedy: bool = False
    tokens: int = 0
    truncated: int = 0


@dataclass
class ChoiceWork:
    spec: cfg.BenchmarkSpec
    plan: ChoicePlan
    items: list[ChoiceItem]
    requests: list[list[LikelihoodRequest]]
    """Per item, one request per choice."""
    info: dict[str, Any]
    cache: JsonlCache | None = None


def _fewshot_info(spec: cfg.BenchmarkSpec, chosen: ChoicePlan) -> dict[str, Any]:
    c = spec.choice
    sha = verified_path(c.fewshot)[1] if c.fewshot else None
    info = {"file": c.fewshot, "sha256": sha, "num_fewshot": chosen.num_fewshot, "sampler": c.sampler,
            "seed": FEWSHOT_SEED, "draw_one_more": c.draw_one_more, "group": c.group, "description": c.description,
            "target_delimiter": c.target_delimiter, "fewshot_delimiter": c.fewshot_delimiter}
    # recorded (and hashed into the prompt template's identity) only when on: raw-text runs keep their hashes
    return {**info, "chat_template": True} if chosen.chat_template else info


class ChoiceTask:
    """A likelihood-scored benchmark (``task: choice``)."""

    def plan(self, plan: Any, spec: cfg.BenchmarkSpec) -> ChoiceWork:
        chosen: ChoicePlan = plan.choices[spec.name]
        rows = load_rows(spec.data)
        used = rows[: plan.limit] if plan.limit is not None else rows
        pool = load_rows(spec.choice.fewshot) if spec.choice.fewshot and chosen.num_fewshot else ()
        items = build_items(spec, used, pool, chosen.num_fewshot, chosen.chat_template)
        requests = [[LikelihoodRequest(f"{it.sample_id}/{i}", ctx, cont,
                                       request_seed(plan.decoding.seed, it.sample_id, i), chosen.chat_template)
                     for i, (ctx, cont) in enumerate(zip(it.contexts, it.continuations))] for it in items]
        fewshot = _fewshot_info(spec, chosen)
        info = dict(name=spec.name, version=spec.version, data_file=spec.data, dataset_version=spec.dataset_version,
                    data_sha256=verified_path(spec.data)[1], n_total=len(rows), n_used=len(used),
                    prompt_template="choice", prompt_template_hash=sha256_text(repr(sorted(fewshot.items())))[:16])
        return ChoiceWork(spec, chosen, items, requests, info)

    def prepare(self, plan: Any, work: ChoiceWork) -> None:
        pass  # the estimator was validated by the engine at plan time, the gold indices by build_items

    def _cache(self, plan: Any, work: ChoiceWork, fingerprint: str) -> JsonlCache:
        if work.cache is None:
            key = cache_key(work.plan.estimator.identity(), plan.engine_identity())[:16]
            work.cache = JsonlCache(plan.cache_dir / "likelihoods" / f"{fingerprint[:16]}-{key}.jsonl",
                                    LikelihoodScore)
        return work.cache

    def run(self, plan: Any, work: ChoiceWork, steps: Any, store: Any, state: Any) -> None:
        name, cache = work.spec.name, self._cache(plan, work, state.fingerprint)
        flat = [r for reqs in work.requests for r in reqs]
        todo = [r for r in flat if r.key not in cache]
        state.cached[name], state.generated[name] = len(flat) - len(todo), 0
        bar = plan.progress(f"{name}: score", len(todo)) if plan.progress and todo else None
        t0 = time.monotonic()
        try:
            for start in range(0, len(todo), plan.decoding.batch_size):
                batch = todo[start : start + plan.decoding.batch_size]
                results: list[LikelihoodResult] = plan.engine.loglikelihood(batch, work.plan.estimator)
                if len(results) != len(batch):
                    raise EngineError(f"engine {plan.engine.name} returned {len(results)} likelihoods "
                                      f"for {len(batch)} requests")
                cache.extend((r.key, LikelihoodScore(**vars(res))) for r, res in zip(batch, results))
                state.generated[name] += len(batch)
                if bar:
                    bar.update(len(batch))
                stopping.safe_point()  # the batch is cached: a stop asked for during it takes effect here
        finally:
            state.timing[f"{name}.generate_s"] = round(time.monotonic() - t0, 3)
            if bar:
                bar.close()

    def score(self, plan: Any, work: ChoiceWork, steps: Any, store: Any, state: Any, verify: bool = True,
              out: Any = None) -> Any:
        """Verdicts of every question whose choices are all scored (``verify`` is the generated tasks' switch:
        a choice verdict is arithmetic on cached scores, so it is always given). The rows are returned
        (``out``, where the generated tasks write theirs, is not used)."""
        from .runner import BenchmarkResult

        cache = self._cache(plan, work, state.fingerprint)
        per_sample, rows = [], []
        for item, reqs in zip(work.items, work.requests):
            scores: list[LikelihoodScore] = [cache.get(r.key) for r in reqs]
            if any(s is None for s in scores):
                continue
            v = verdict(item, [s.logprob for s in scores])
            per_sample.append([v])
            rows.append(_row(work.spec, item, scores, v))
        metric_values, counts = metric_lib.compute(work.spec.metrics, per_sample, 1)
        counts.update(generated=state.generated.get(work.spec.name, 0), cached=state.cached.get(work.spec.name, 0),
                      missing=len(work.items) - len(per_sample))
        estimator = work.plan.estimator.component()
        info = BenchmarkInfo(**work.info, verifier="choice", verifier_version=SCORER_VERSION, estimator=estimator,
                             fewshot=_fewshot_info(work.spec, work.plan))
        return BenchmarkResult(info, metric_values, counts, rows)


def _row(spec: cfg.BenchmarkSpec, item: ChoiceItem, scores: list[LikelihoodScore], v: Any) -> dict[str, Any]:
    """One samples.jsonl row: every choice's logprob, stderr and is_greedy, and the verdict (``score``: the
    benchmark's first metric, what the leaderboard's paired statistics read)."""
    contexts = sorted(set(item.contexts), key=item.contexts.index)
    return {"benchmark": spec.name, "id": item.sample_id, "index": 0, "contexts": contexts,
            "continuations": list(item.continuations), "gold": list(item.gold),
            "logprobs": [s.logprob for s in scores], "stderrs": [s.stderr for s in scores],
            "is_greedy": [s.is_greedy for s in scores], "tokens": [s.tokens for s in scores],
            "truncated": [s.truncated for s in scores], "answer": v.answer, "passed": v.passed,
            "score": v.details[spec.metrics[0]],
            "status": v.status, "details": v.details}


CHOICE_TASK = ChoiceTask()
