"""Likelihood-scored multiple choice: contexts built as lm-eval builds them, and lm-eval's verdicts.

A row of a choice data file is one question in lm-eval's processed form (what ``doc_to_text``,
``doc_to_choice`` and ``doc_to_target`` give): ``query`` and ``choices`` (the continuation varies: ARC,
HellaSwag, MMLU, PIQA, TruthfulQA) or ``contexts`` and ``continuation`` (the context varies, the
continuation is shared: WinoGrande's partial scoring); ``gold`` is the right choice's index, or the list of
true choices' indices (TruthfulQA-MC2). Contexts follow lm_eval 0.4.8 ``api/task.py:
ConfigurableTask.fewshot_context`` and ``construct_requests``, few-shot draws ``api/samplers.py:
ContextSampler.get_context`` with the evaluator's default ``fewshot_random_seed`` 1234: one
``random.Random(1234)`` per task, ``sample(pool, n)`` per question in file order, so a question's examples
do not depend on ``--limit`` (``n`` is one more where lm-eval draws one more: ``ChoiceSpec.draw_one_more``).
tests/harness/test_choice_lm_eval.py holds these requests to the ones lm-eval's own code builds.

Under a chat template (``chat``: ``choice.chat_template``) each context is the user turn the engine renders
through the model's template with its generation prompt, and each continuation drops the target delimiter
(lm_eval 0.4.13 ``construct_requests``: the assistant turn starts right after the template's generation prompt).

Verdicts: ``acc`` (argmax logprob is gold), ``acc_norm`` (argmax of logprob / the choice's length in
characters, lm-eval's ``completion_len``; ``api/task.py: ConfigurableTask.process_results``), ``mc2``
(probability mass of the true answers among all, ``tasks/truthfulqa/utils.py: process_results_mc2``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .config import BenchmarkSpec, ChoiceSpec
from .errors import DataError
from .records import Verdict

FEWSHOT_SEED = 1234  # lm-eval's default --fewshot_random_seed


@dataclass(frozen=True)
class ChoiceItem:
    """One question as requests: ``contexts[i]`` + ``continuations[i]`` is choice i scored (n choices);
    ``lengths[i]`` is what acc_norm divides by; ``gold`` the right choices' indices."""

    sample_id: str
    contexts: tuple[str, ...]
    continuations: tuple[str, ...]
    lengths: tuple[int, ...]
    gold: tuple[int, ...]
    row: dict


def _gold(row: dict, name: str) -> tuple[int, ...]:
    raw = row.get("gold")
    gold = tuple(raw) if isinstance(raw, list) else (raw,)
    n = len(row.get("choices") or row.get("contexts") or ())
    if not gold or any(not isinstance(g, int) or isinstance(g, bool) or not 0 <= g < n for g in gold):
        raise DataError(f"{name}: row {row.get('id')!r} has gold {raw!r} outside its {n} choices; "
                        f"fix the data file so gold indexes choices 0..{n - 1}")
    return gold


def _example(row: dict, spec: ChoiceSpec, gold: int) -> str:
    """A solved few-shot example: its text, the target delimiter, its answer, the few-shot delimiter."""
    if "contexts" in row:
        return row["contexts"][gold] + spec.target_delimiter + row["continuation"] + spec.fewshot_delimiter
    return row["query"] + spec.target_delimiter + row["choices"][gold] + spec.fewshot_delimiter


def build_items(bench: BenchmarkSpec, rows: Sequence[dict], pool: Sequence[dict], num_fewshot: int,
                chat: bool = False) -> list[ChoiceItem]:
    """The requests of every question of ``rows`` (file order), few-shot examples drawn from ``pool``; ``chat``:
    the continuations without the target delimiter (their contexts become chat user turns)."""
    spec = bench.choice
    assert spec is not None
    delimiter = "" if chat else spec.target_delimiter
    if num_fewshot and len(pool) < num_fewshot:
        raise DataError(f"{bench.name}: {num_fewshot}-shot needs {num_fewshot} few-shot rows, "
                        f"{spec.fewshot or 'no few-shot file'} has {len(pool)}; lower choice.num_fewshot")
    one_more = spec.draw_one_more or spec.fewshot == bench.data
    groups: dict[object, tuple[list[dict], random.Random]] = {}
    items = []
    for row in rows:
        gold = _gold(row, bench.name)
        key = row.get(spec.group) if spec.group else None
        if key not in groups:
            members = [r for r in pool if not spec.group or r.get(spec.group) == key]
            groups[key] = (members, random.Random(FEWSHOT_SEED))
        members, rnd = groups[key]
        shots = ""
        if num_fewshot:
            n = num_fewshot + 1 if one_more else num_fewshot
            drawn = members[:n] if spec.sampler == "first_n" else rnd.sample(members, n)
            chosen = [r for r in drawn if r is not row and r.get("id") != row.get("id")][:num_fewshot]
            shots = "".join(_example(r, spec, _gold(r, bench.name)[0]) for r in chosen)
        prefix = spec.description.format_map(row) + shots
        if "contexts" in row:
            contexts = tuple(prefix + c for c in row["contexts"])
            continuations = (delimiter + row["continuation"],) * len(contexts)
            lengths = tuple(len(c) for c in row["contexts"])
        else:
            contexts = (prefix + row["query"],) * len(row["choices"])
            continuations = tuple(delimiter + c for c in row["choices"])
            lengths = tuple(len(c) for c in row["choices"])
        items.append(ChoiceItem(str(row["id"]), contexts, continuations, lengths, gold, row))
    return items


def verdict(item: ChoiceItem, logprobs: Sequence[float]) -> Verdict:
    """lm-eval's per-question results from the choices' log-likelihoods (nats), as one Verdict."""
    lls = np.asarray(logprobs, dtype=np.float64)
    pred = int(np.argmax(lls))
    pred_norm = int(np.argmax(lls / np.asarray(item.lengths, dtype=np.float64)))
    # mc2: exp of each logprob, normalised over all choices (shifted by the max first: same ratio, no underflow)
    mass = np.exp(lls - lls.max())
    mc2 = float(mass[list(item.gold)].sum() / mass.sum())
    acc = float(pred in item.gold)
    return Verdict(score=acc, passed=bool(acc), answer=str(pred), status="scored",
                   details={"acc": acc, "acc_norm": float(pred_norm in item.gold), "mc2": mc2,
                            "pred": pred, "pred_norm": pred_norm})


def _detail(name: str):
    def per_sample(verdicts: Sequence[Verdict]) -> float:
        return sum(float(v.details[name]) for v in verdicts) / len(verdicts)

    return per_sample


# metric families (registered lazily in metrics.py): one per-sample function each, whatever k
def acc_metric(k: int) -> dict:
    return {"acc": _detail("acc")}


def acc_norm_metric(k: int) -> dict:
    return {"acc_norm": _detail("acc_norm")}


def mc2_metric(k: int) -> dict:
    return {"mc2": _detail("mc2")}
