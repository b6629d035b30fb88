"""lm-eval's logged samples as rows of DARE's samples.jsonl, in the shape the native runner writes for the same
kind of task: a generated answer (``completion``, ``answer``) or a likelihood-scored question (every choice's
``logprobs`` and ``is_greedy``, as harness/choice_run.py writes them). ``score`` is the task's first metric: what
the leaderboard's paired statistics read."""

from __future__ import annotations

from typing import Any


def metric_values(row: dict[str, Any]) -> dict[str, Any]:
    """The row's per-document metric values (lm-eval logs each metric under its own name)."""
    return {m: row[m] for m in row.get("metrics", []) if m in row}


def _verdict(row: dict[str, Any]) -> dict[str, Any]:
    scores = metric_values(row)
    first = next(iter(scores.values()), 0.0)
    score = float(first) if isinstance(first, (int, float)) else 0.0
    return {"passed": bool(score), "score": score, "status": "scored",
            "details": {"filter": row.get("filter", "none"), **scores}}


def generated_row(task: str, row: dict[str, Any]) -> dict[str, Any]:
    """A ``generate_until`` document: its context as the user turn, the decoded text, lm-eval's filtered answer."""
    context = row.get("arguments", {}).get("gen_args_0", {}).get("arg_0", "")
    resps = row.get("resps") or [[""]]
    filtered = row.get("filtered_resps") or [""]
    return {"benchmark": task, "id": str(row["doc_id"]), "index": 0,
            "messages": [{"role": "user", "content": context}], "reference": row.get("target"),
            "completion": resps[0][0] if resps and resps[0] else "", "answer": filtered[0], **_verdict(row),
            "nfe": None, "nfe_official": None, "finish_reason": "stop"}


def scored_row(task: str, row: dict[str, Any]) -> dict[str, Any]:
    """A ``multiple_choice`` or ``loglikelihood`` document: each request's context and continuation as lm-eval
    sent them, and the ``(logprob, is_greedy)`` the dare model returned for it (lm-eval logs them as strings)."""
    arguments = list((row.get("arguments") or {}).values())
    pairs = [(a.get("arg_0", ""), a.get("arg_1", "")) for a in arguments]
    answers = [resp[0] for resp in row.get("resps") or []]
    logprobs = [float(a[0]) for a in answers]
    contexts = list(dict.fromkeys(c for c, _ in pairs))
    best = max(range(len(logprobs)), key=logprobs.__getitem__) if logprobs else -1
    return {"benchmark": task, "id": str(row["doc_id"]), "index": 0, "contexts": contexts,
            "continuations": [x for _, x in pairs], "reference": row.get("target"), "logprobs": logprobs,
            "is_greedy": [str(a[1]) == "True" for a in answers], "answer": str(best), **_verdict(row)}
