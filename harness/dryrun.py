"""``dare-eval --dry-run``: the resolved plan as text, without loading weights or generating.

Shows what a run would record and key its caches on: the DecodingConfig (the fields the decoder reads)
with its hash, the engine's options and token identity, the decoder and its ``extra`` options, and per
benchmark the dataset version and data sha256, the prompt template (name and hash) and the verifier with its
options.
"""

from __future__ import annotations

from . import config as cfg
from .choice_run import ChoicePlan
from .data import verified_path
from .engine import EngineBase
from .options import HARNESS_FIELDS, capabilities
from .prompts import template
from .records import canonical_json
from .registry import decoders
from .runner import EvalPlan
from .verifiers import verifiers


def describe(plan: EvalPlan) -> str:
    """Readable lines of the plan (one ``key: value`` per line, JSON values)."""
    lines = [f"suite: {plan.suite.name} ({', '.join(plan.suite.benchmarks)})", f"model: {plan.model_name}"]
    ctx = plan.engine_context
    if ctx is not None and ctx.model_path is None and ctx.model_spec is not None and not ctx.model_spec.path \
            and capabilities(type(plan.engine)).needs_checkpoint:
        lines.append("checkpoint: none found; planned from the model config alone (a run needs the weights)")
    options = plan.engine.options.model_dump(mode="json") if isinstance(plan.engine, EngineBase) else {}
    lines.append(f"engine: {plan.engine.name} {plan.engine.version} options {canonical_json(options)}")
    lines.append(f"engine identity (generation cache key): {canonical_json(plan.engine_identity())}")
    if plan.decoder is not None:
        extra = plan.decoder_options.model_dump(mode="json") if plan.decoder_options is not None else {}
        reads = sorted(plan.decoder.reads | HARNESS_FIELDS)
        lines.append(f"decoder: {plan.decoder.name} {plan.decoder.version} options {canonical_json(extra)}")
        lines.append(f"decoder reads: {', '.join(reads)}")
        lines.extend(f"decoder rule for {name}: {rule}" for name, rule in sorted(plan.decoder.rules.items()))
    decoding = plan.decoding.to_record(plan.decoding_fields)
    lines.append(f"decoding: config_hash {decoding.pop('config_hash')} {canonical_json(decoding)}")
    lines.append(f"generation key: {plan.generation_key()}")
    for name in plan.suite.benchmarks:
        spec = cfg.benchmark(name)
        _, sha = verified_path(spec.data)
        if name in plan.choices:
            lines.extend(choice_lines(name, spec, sha, plan.choices[name]))
            continue
        tmpl = template(spec.prompt)
        lines.append(f"{name}: data {spec.data} sha256 {sha}; prompt {spec.prompt} hash {tmpl.template_hash()}")
        lines.append(f"{name}: dataset version {spec.dataset_version}")
        version = verifiers.get(spec.verifier).version
        lines.append(f"{name}: verifier {spec.verifier} {version} "
                     f"options {canonical_json(plan.verifier_options_for(name))}")
    if plan.limit is not None:
        lines.append(f"limit: {plan.limit} samples per benchmark")
    return "\n".join(lines)


def choice_lines(name: str, spec: cfg.BenchmarkSpec, sha: str, chosen: ChoicePlan) -> list[str]:
    """A likelihood-scored benchmark: its data, contexts and the estimator the engine resolved."""
    est = chosen.estimator
    c = spec.choice
    return [f"{name}: data {spec.data} sha256 {sha}; dataset version {spec.dataset_version}",
            f"{name}: choice {chosen.num_fewshot}-shot from {c.fewshot or '(none)'} ({c.sampler}), contexts "
            f"{'in the chat template' if chosen.chat_template else 'as raw text'}; "
            f"metrics {', '.join(spec.metrics)}",
            f"{name}: estimator {est.name} {est.version} options {canonical_json(est.options.model_dump(mode='json'))}"
            f"{' (exact)' if est.exact else ''}"]


def rule_lines() -> list[str]:
    """--list: each commit rule a DecodingConfig field sets, with the registered decoders declaring it
    (``threshold`` means Fast-dLLM's top-1 rule in some decoders and SDAR's quota floor in others)."""
    by_rule: dict[tuple[str, str], list[str]] = {}
    for name in decoders.names():
        for field_name, rule in decoders.get(name).rules.items():
            by_rule.setdefault((field_name, rule), []).append(name)
    lines = ["decoder rules (what a field means in the decoders that read it):"] if by_rule else []
    return lines + [f"  {f} in {', '.join(names)}: {rule}" for (f, rule), names in sorted(by_rule.items())]
