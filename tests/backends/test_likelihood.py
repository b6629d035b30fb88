"""The likelihood capability of the torch engine: batch independence, the length rule, bad input, resolution.

Values against the authors' code are in test_likelihood_parity.py, the block estimator against brute force in
test_likelihood_block.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dare.backends.engines.torch import TorchEngine
from dare.harness.engine import EngineContext
from dare.harness.errors import ConfigError, DareError, InputError, RegistryError
from dare.harness.likelihood import LikelihoodEngine, LikelihoodRequest
from dare.harness.options import capabilities

MODELS = Path(__file__).resolve().parents[2] / "configs" / "models"
REQUESTS = [LikelihoodRequest("a", "Question: what is two plus two?\nAnswer:", " four", 3),
            LikelihoodRequest("b", "The cat sat on the", " mat, and then it slept all afternoon.", 11),
            LikelihoodRequest("c", "Sudoku: 1200034000214300", " 1243", 5)]
SETTINGS = [("tiny-llada", "llada_mc", {"mc_num": 8, "batch": 4, "cfg": 0.5, "check_greedy": True}),
            ("tiny-dream", "dream_mc", {"mc_num": 8, "batch": 4, "log_type": "union"}),
            ("tiny-dream", "dream_ar", {"direction": "btf"}),
            ("tiny-sdar", "block_elbo", {"mc_num": 8})]


@pytest.fixture(scope="module")
def engines():
    return {name: TorchEngine(EngineContext(model_name=name, model_path=MODELS / name, device="cpu"))
            for name in ("tiny-llada", "tiny-dream", "tiny-sdar")}


def test_the_torch_engine_declares_and_implements_the_capability(engines):
    assert capabilities(TorchEngine).likelihood
    assert isinstance(engines["tiny-llada"], LikelihoodEngine)


@pytest.mark.parametrize("model,name,options", SETTINGS, ids=[s[1] for s in SETTINGS])
def test_a_result_does_not_depend_on_its_batch(engines, model, name, options):
    """Alone, packed with longer and shorter requests, and in another order: the identical value."""
    engine = engines[model]
    info = engine.likelihood_estimator(name, options)
    alone = engine.loglikelihood([REQUESTS[2]], info)[0]
    packed = engine.loglikelihood(REQUESTS, info)
    reordered = engine.loglikelihood(REQUESTS[::-1], info)
    assert packed[2] == alone == reordered[0]
    assert packed[0] != packed[2]


def test_scoring_in_passes_changes_nothing(engines, monkeypatch):
    """Requests are planned and scored REQUESTS_PER_PASS at a time (memory); one at a time gives the same."""
    from dare.backends.likelihood import engine as likelihood_engine

    engine = engines["tiny-llada"]
    info = engine.likelihood_estimator("llada_mc", {"mc_num": 8, "batch": 4, "check_greedy": True})
    together = engine.loglikelihood(REQUESTS, info)
    monkeypatch.setattr(likelihood_engine, "REQUESTS_PER_PASS", 1)
    assert engine.loglikelihood(REQUESTS, info) == together


SUDOKU = "Sudoku: 1200034000214300\n"
CHOICES = [LikelihoodRequest(f"q/{d}", SUDOKU + "Answer:", d, 7) for d in "1234"]  # one token each


def _forward_rows(monkeypatch, model) -> list[int]:
    """The rows each forward sends through the network (cond and uncond copies both counted)."""
    rows: list[int] = []
    forward = model.net.hidden_states
    monkeypatch.setattr(model.net, "hidden_states", lambda tokens, *a: rows.append(len(tokens)) or forward(tokens, *a))
    return rows


@pytest.mark.parametrize("model,name,options", SETTINGS, ids=[s[1] for s in SETTINGS])
def test_requests_of_one_width_score_alike_alone_or_together(engines, model, name, options):
    """Four one-token answers after one context (MMLU's " A" to " D"): rows of one width, few scored positions
    each, so the LM head's product has 1-4 rows alone and 4-16 together, and rows whose inputs coincide run once.
    Each value is the one it has alone, and each choice is scored against its own token (the values differ)."""
    engine = engines[model]
    info = engine.likelihood_estimator(name, options)
    together = [r.logprob for r in engine.loglikelihood(CHOICES, info)]
    assert together == [engine.loglikelihood([c], info)[0].logprob for c in CHOICES]
    assert len(set(together)) == 4


def test_one_token_choices_after_one_context_are_one_row(engines, monkeypatch):
    """LLaDA's MMLU recipe (mc_num 1): the masked answer is the whole target, so the four choices' rows are one
    input; under CFG its unconditional copy runs beside it once too."""
    engine = engines["tiny-llada"]
    rows = _forward_rows(monkeypatch, engine.model)
    for cfg, expected in ((0.0, [1]), (0.5, [2])):
        rows.clear()
        engine.loglikelihood(CHOICES, engine.likelihood_estimator("llada_mc", {"mc_num": 8, "batch": 4, "cfg": cfg}))
        assert rows == expected


def test_guidance_keeps_apart_equal_rows_whose_prompts_differ(engines, monkeypatch):
    """"...12" + "4" and "...1" + "24" with only the 4 masked are the same input row, but CFG's unconditional
    copy masks the prompt, "12" in one and "1" in the other: shared without CFG, apart with it."""
    engine = engines["tiny-llada"]
    a, b = LikelihoodRequest("a", SUDOKU + "12", "4", 3), LikelihoodRequest("b", SUDOKU + "1", "24", 4)
    rows = _forward_rows(monkeypatch, engine.model)
    for cfg in (0.0, 0.5):
        info = engine.likelihood_estimator("llada_mc", {"mc_num": 16, "batch": 2, "cfg": cfg})
        alone = [engine.loglikelihood([r], info)[0].logprob for r in (a, b)]
        apart = sum(rows)
        rows.clear()
        assert [r.logprob for r in engine.loglikelihood([a, b], info)] == alone
        assert sum(rows) == (apart - 1 if cfg == 0 else apart)  # the one shared input, without CFG only
        rows.clear()


def test_a_guided_forward_holds_as_many_tokens_as_an_unguided_one(engines, monkeypatch):
    """Under guidance each row runs twice (its unconditional copy); rows are grouped so that what goes through
    the network, copies included, stays at the CPU's forward size (CPU_TOKENS_PER_FORWARD), where a CPU runs
    fastest (benchmarks/likelihood_speed.py: guided groups of twice that size took 22% longer)."""
    from dare.backends.decoding.mdm import CPU_TOKENS_PER_FORWARD

    engine, shapes = engines["tiny-llada"], []
    forward = engine.model.net.hidden_states
    monkeypatch.setattr(engine.model.net, "hidden_states",
                        lambda tokens, *a: shapes.append(tokens.shape) or forward(tokens, *a))
    for cfg in (0.0, 0.5):
        shapes.clear()
        engine.loglikelihood(REQUESTS[1:2], engine.likelihood_estimator("llada_mc", {"mc_num": 64, "batch": 8,
                                                                                      "cfg": cfg}))
        biggest = max(rows * width for rows, width in shapes)
        assert CPU_TOKENS_PER_FORWARD // 2 < biggest <= CPU_TOKENS_PER_FORWARD, (cfg, shapes)


def test_the_seed_is_the_requests_own(engines):
    engine = engines["tiny-llada"]
    info = engine.likelihood_estimator("llada_mc", {"mc_num": 4, "batch": 2})
    a, b = engine.loglikelihood([REQUESTS[1], LikelihoodRequest("b2", REQUESTS[1].context,
                                                                REQUESTS[1].continuation, 12)], info)
    assert a.logprob != b.logprob


def test_a_long_context_loses_its_left_tokens_and_says_how_many(engines):
    engine = engines["tiny-llada"]
    model = engine.model
    full = engine.likelihood_estimator(None, {}).spec.encode(model.tokenizer, REQUESTS[1], model.eos_id, 10_000)
    limit = len(full.target) + 2  # two context tokens kept
    info = engine.likelihood_estimator("llada_mc", {"mc_num": 4, "batch": 4, "max_length": limit})
    (result,) = engine.loglikelihood([REQUESTS[1]], info)
    dropped = len(full.prefix) - 2
    assert result.truncated == dropped > 0 and result.tokens == len(full.target)
    # the same value as the left-cut context given outright
    kept = model.tokenizer.decode(full.prefix[dropped:])
    assert model.tokenizer(kept)["input_ids"] == full.prefix[dropped:]
    (cut,) = engine.loglikelihood([LikelihoodRequest("b", kept, REQUESTS[1].continuation, 11)], info)
    assert cut.logprob == result.logprob and cut.truncated == 0


def _one_line(exc: DareError) -> str:
    message = str(exc)
    assert "\n" not in message and exc.exit_code == 2
    return message


@pytest.mark.parametrize("name,options,error,needle", [
    ("llada_mc", {"mc_num": 10, "batch": 4}, ConfigError, "mc_num=10 is not a multiple of batch=4"),
    ("llada_mc", {"mc_nums": 8}, ConfigError, "likelihood.mc_nums: unknown option; did you mean 'mc_num'?"),
    ("llada_mx", {}, RegistryError, "unknown scoring likelihood estimator 'llada_mx'; did you mean 'llada_mc'"),
    ("dream_mc", {}, ConfigError, "'dream_mc' does not serve llada models; use 'llada_mc' (or leave"),
])
def test_bad_settings_are_refused_in_one_line(engines, name, options, error, needle):
    with pytest.raises(error) as caught:
        engines["tiny-llada"].likelihood_estimator(name, options)
    assert needle in _one_line(caught.value)


@pytest.mark.parametrize("request_,options,needle", [
    (LikelihoodRequest("e", "Question:", "", 0), {}, "'e': the continuation is empty"),
    (LikelihoodRequest("l", "Q", " a much longer continuation than fits", 0), {"max_length": 6},
     "'l': the continuation has"),
])
def test_bad_requests_are_refused_in_one_line(engines, request_, options, needle):
    engine = engines["tiny-llada"]
    with pytest.raises(InputError) as caught:
        engine.loglikelihood([request_], engine.likelihood_estimator(None, {"mc_num": 2, "batch": 2, **options}))
    assert needle in _one_line(caught.value)


def test_rolling_is_served_where_a_whole_text_has_an_estimate(engines):
    text = [LikelihoodRequest("t", "", "The cat sat on the mat.", 1)]
    for model in ("tiny-llada", "tiny-sdar"):
        engine = engines[model]
        info = engine.likelihood_estimator(None, {"mc_num": 4} | ({"batch": 4} if model == "tiny-llada" else {}))
        assert engine.loglikelihood_rolling(text, info)[0].logprob < 0
    dream = engines["tiny-dream"]
    with pytest.raises(ConfigError) as caught:
        dream.loglikelihood_rolling(text, dream.likelihood_estimator(None, {}))
    assert "no whole-text estimate" in _one_line(caught.value)
    with pytest.raises(InputError):
        engines["tiny-sdar"].loglikelihood_rolling(REQUESTS[:1], engines["tiny-sdar"].likelihood_estimator(None, {}))


def test_a_family_is_offered_every_estimator_that_serves_it(engines):
    with pytest.raises(ConfigError) as caught:
        engines["tiny-dream"].likelihood_estimator("block_elbo", {})
    assert "use 'dream_ar' or 'dream_mc'" in _one_line(caught.value)


def test_the_family_default_and_the_record(engines):
    info = engines["tiny-dream"].likelihood_estimator(None, {"log_type": "btf"})
    assert info.name == "dream_mc" and not info.exact
    assert info.component().options["log_type"] == "btf" and info.identity()["options"]["mc_num"] == 128
    assert engines["tiny-sdar"].likelihood_estimator(None, {}).name == "block_elbo"


def _greedy_targets(model) -> list:
    """REQUESTS' contexts, each with the 6 tokens LLaDA's generate decodes after it with one block, one token per
    step, low confidence (whose tokens test_llada_reference pins to the official loop)."""
    import torch

    from dare.backends.decoding import llada
    from dare.backends.decoding.common import Canvas
    from dare.backends.decoding.mdm import decode_masked_diffusion
    from dare.backends.likelihood.base import Encoded
    from dare.harness.records import DecodingConfig

    prefixes = [model.tokenizer(r.context)["input_ids"] for r in REQUESTS]
    cfg = DecodingConfig(gen_length=6, steps=6, block_length=6)
    canvas = Canvas.build(prefixes, 6, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        decoded = decode_masked_diffusion(model, canvas, cfg, llada.LladaOptions(),
                                          [torch.Generator().manual_seed(0)] * 3, llada.low_confidence).tokens
    return [Encoded(p, t) for p, t in zip(prefixes, decoded.tolist())]


def test_the_greedy_check_is_llada_one_token_per_step_decoding(engines):
    """LLaDA's ``suffix_greedy_prediction`` is that generate: the decoded targets pass, each with one token
    changed fails. Targets of 6 tokens, so committing in another order (left to right) decodes others."""
    from dare.backends.likelihood.base import Encoded
    from dare.backends.likelihood.masked import greedy_matches

    model = engines["tiny-llada"].model
    right = _greedy_targets(model)
    wrong = [Encoded(e.prefix, e.target[:-1] + [(e.target[-1] + 1) % model.mask_id]) for e in right]
    assert greedy_matches(model, right + wrong, 0.0) == [True] * 3 + [False] * 3


def test_a_wrong_commit_settles_the_greedy_check_at_once(engines, monkeypatch):
    """A committed token never changes, so a request is settled False at its first commit that is not its
    target's token and takes no more steps (counted at the network): targets the model decodes take their 6
    steps; those targets with every token changed stop after the first step, whichever position it commits."""
    from dare.backends.likelihood.base import Encoded
    from dare.backends.likelihood.masked import greedy_matches

    model = engines["tiny-llada"].model
    right = _greedy_targets(model)
    rows = _forward_rows(monkeypatch, model)  # canvas rows through the network
    assert greedy_matches(model, right, 0.0) == [True] * 3 and sum(rows) == 3 * 6
    wrong = [Encoded(e.prefix, [(t + 1) % model.mask_id for t in e.target]) for e in right]  # every token changed
    rows.clear()
    assert greedy_matches(model, wrong, 0.0) == [False] * 3 and sum(rows) == 3


def test_answers_after_one_context_share_one_greedy_canvas(engines, monkeypatch):
    """The greedy decode depends only on the prefix and the target's length: three wrong answers of the decoded
    answer's length (its last token changed) beside each right one ride on its canvas, 6 steps per prefix as
    the right answers alone, and each is answered as it is alone."""
    from dare.backends.likelihood.base import Encoded
    from dare.backends.likelihood.masked import greedy_matches

    model = engines["tiny-llada"].model
    right = _greedy_targets(model)
    wrong = [Encoded(e.prefix, e.target[:-1] + [(e.target[-1] + k) % model.mask_id]) for e in right for k in (1, 2, 3)]
    rows = _forward_rows(monkeypatch, model)
    assert greedy_matches(model, right + wrong, 0.0) == [True] * 3 + [False] * 9
    assert sum(rows) == 3 * 6
    assert [greedy_matches(model, [e], 0.0)[0] for e in right + wrong] == [True] * 3 + [False] * 9


def test_the_cached_engine_scores_with_the_same_model():
    """fastdllm shares the torch engine's model and its likelihood capability: the same values."""
    from dare.backends.engines.fastdllm import FastDllmEngine

    fast = FastDllmEngine(EngineContext(model_name="tiny-sdar", model_path=MODELS / "tiny-sdar", device="cpu"))
    plain = TorchEngine(EngineContext(model_name="tiny-sdar", model_path=MODELS / "tiny-sdar", device="cpu"))
    assert capabilities(fast).likelihood
    results = [e.loglikelihood(REQUESTS, e.likelihood_estimator(None, {"mc_num": 4})) for e in (fast, plain)]
    assert results[0] == results[1]
