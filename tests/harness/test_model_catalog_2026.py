"""The checkpoints added by name in 2026 resolve through their aliases, plan their decoding per suite from the
shipped model configs, and, without weights, stop with the download command of their hub repository."""

from __future__ import annotations

import pytest

from dare.harness import cli
from dare.harness import config as hcfg
from dare.harness.errors import ModelError
from dare.harness.models import resolve
from dare.harness.records import DecodingConfig

HUB = {"llada-moe-7b-a1b-base": "inclusionAI/LLaDA-MoE-7B-A1B-Base",
       "llada-moe-7b-a1b-instruct": "inclusionAI/LLaDA-MoE-7B-A1B-Instruct",
       "trado-4b-instruct": "Gen-Verse/TraDo-4B-Instruct", "trado-8b-instruct": "Gen-Verse/TraDo-8B-Instruct",
       "trado-8b-thinking": "Gen-Verse/TraDo-8B-Thinking", "d3llm-llada": "d3LLM/d3LLM_LLaDA",
       "d3llm-dream": "d3LLM/d3LLM_Dream", "dirl-8b-instruct": "OpenMOSS-Team/DiRL-8B-Instruct",
       "mmada-8b-mixcot": "Gen-Verse/MMaDA-8B-MixCoT", "diffucoder-7b-base": "apple/DiffuCoder-7B-Base",
       "diffucoder-7b-instruct": "apple/DiffuCoder-7B-Instruct", "diffucoder-7b-cpgrpo": "apple/DiffuCoder-7B-cpGRPO",
       "dream-coder-v0-base-7b": "Dream-org/Dream-Coder-v0-Base-7B",
       "dream-coder-v0-instruct-7b": "Dream-org/Dream-Coder-v0-Instruct-7B",
       "d3llm-dream-coder": "d3LLM/d3LLM_Dream_Coder"}
ALIASES = {"llada-moe": "llada-moe-7b-a1b-instruct", "llada-moe-base": "llada-moe-7b-a1b-base",
           "trado-4b": "trado-4b-instruct", "trado-8b": "trado-8b-instruct", "trado-8b-think": "trado-8b-thinking",
           "d3llm-llada-8b": "d3llm-llada", "d3llm-dream-7b": "d3llm-dream",
           "dirl-8b": "dirl-8b-instruct", "mmada-8b": "mmada-8b-mixcot", "diffucoder-base": "diffucoder-7b-base",
           "diffucoder-instruct": "diffucoder-7b-instruct", "diffucoder-cpgrpo": "diffucoder-7b-cpgrpo",
           "dream-coder-7b": "dream-coder-v0-instruct-7b", "dream-coder-instruct": "dream-coder-v0-instruct-7b",
           "dream-coder-base": "dream-coder-v0-base-7b", "d3llm-coder": "d3llm-dream-coder",
           "d3llm-dream-coder-7b": "d3llm-dream-coder"}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_aliases_resolve_to_their_config(alias):
    assert hcfg.model(alias).name == ALIASES[alias]


@pytest.mark.parametrize("name", sorted(HUB))
def test_every_benchmark_gets_a_valid_decoding_config(name):
    spec = hcfg.model(name)
    for suite in hcfg.names("suites"):
        for bench in hcfg.suite(suite).benchmarks:
            DecodingConfig(**spec.decoding_for(suite, bench))


@pytest.mark.parametrize("name", sorted(HUB))
def test_missing_weights_name_the_download_command(name, monkeypatch, tmp_path):
    monkeypatch.setenv("DARE_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelError, match=f"download with `hf download {HUB[name]} --local-dir "
                                         f"\\$DARE_MODEL_DIR/{name}`"):
        resolve(name, None)


@pytest.mark.parametrize("name", sorted(HUB))
def test_dry_run_plans_every_suite_from_the_model_config_alone(name, monkeypatch, tmp_path, capsys):
    """No weights anywhere: --dry-run still resolves each suite's decoder, options and hash; a run stops with the
    download command (exit 2)."""
    monkeypatch.setenv("DARE_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for suite in ("math", "code"):
        assert cli.main(["--model", name, "--suite", suite, "--dry-run", "--out", str(tmp_path / "runs")]) == 0
        out = capsys.readouterr().out
        assert "checkpoint: none found; planned from the model config alone" in out
        assert f"remasking\":\"{hcfg.model(name).decoding_for(suite)['remasking']}\"" in out
    assert cli.main(["--model", name, "--suite", "math", "--limit", "1", "--out", str(tmp_path / "runs")]) == 2
    assert f"hf download {HUB[name]}" in capsys.readouterr().err


def test_trado_decodes_as_its_evaluation_configs():
    """Gen-Verse/dLLM-RL@10b4fd1 configs/trado_eval.yaml and trado_longcot_eval.yaml."""
    fields = ("gen_length", "steps", "block_length", "remasking", "threshold", "temperature")
    instruct, thinking = ([hcfg.model(n).decoding_for("math")[f] for f in fields]
                          for n in ("trado-8b-instruct", "trado-8b-thinking"))
    assert instruct == [2000, 2000, 4, "low_confidence_dynamic", 0.9, 1.0]
    assert thinking == [10000, 10000, 4, "low_confidence_dynamic", 0.9, 1.0]


def test_llada_moe_instruct_decodes_per_suite_as_the_reference_system_runs_it():
    """yjyddq/DARE@83ae8a3 opencompass/llada_moe_7b_a1b_examples: blocks of 64, 64 steps in all, greedy."""
    spec = hcfg.model("llada-moe")
    fields = ("gen_length", "steps", "block_length", "temperature")
    gsm8k, math500, aime = ([spec.decoding_for("math", b)[f] for f in fields] for b in ("gsm8k", "math500", "aime2024"))
    assert (gsm8k, math500, aime) == ([256, 64, 64, 0.0], [512, 64, 64, 0.0], [2048, 64, 64, 1.0])
    assert (spec.mask_id, spec.eos_id, spec.architecture) == (156895, 156892, "llada_moe")


def test_diffucoder_decodes_as_its_authors_usage():
    """apple/ml-diffucoder@f735e01: README.md (Base; cpGRPO under "Usage for Instruct model") and inference_demo.py
    (Instruct): 256 tokens in 256 steps, entropy order, top_p 0.95; the Instruct models end at <|dlm_pad|>."""
    fields = ("gen_length", "steps", "block_length", "remasking", "temperature", "top_p")
    got = {n: [hcfg.model(n).decoding_for("code", "humaneval")[f] for f in fields]
           for n in ("diffucoder-7b-base", "diffucoder-7b-instruct", "diffucoder-7b-cpgrpo")}
    assert got == {"diffucoder-7b-base": [256, 256, 256, "entropy", 0.2, 0.95],
                   "diffucoder-7b-instruct": [256, 256, 256, "entropy", 0.3, 0.95],
                   "diffucoder-7b-cpgrpo": [256, 256, 256, "entropy", 0.4, 0.95]}
    assert [hcfg.model(n).stop_tokens for n in got] == [[], ["<|dlm_pad|>"], ["<|dlm_pad|>"]]


def test_dream_coder_decodes_as_its_evaluation_scripts():
    """DreamLM/Dream-Coder@87409da instruct/code_eval/README.md (evalplus: 512 tokens and steps, T 0.1, the dllm
    provider's top_p 0.9) and base/eval_code_base.sh (HumanEval T 0.2, MBPP T 0.1, gsm8k_cot 256 tokens greedy);
    hao-ai-lab/d3LLM@e5bfcac eval_scripts/dream-coder.sh for the distilled model."""
    fields = ("gen_length", "steps", "remasking", "temperature", "top_p")
    instruct, base = hcfg.model("dream-coder-7b"), hcfg.model("dream-coder-base")
    assert [instruct.decoding_for("code", "mbpp")[f] for f in fields] == [512, 512, "entropy", 0.1, 0.9]
    assert [base.decoding_for("code", b)["temperature"] for b in ("humaneval", "humanevalplus", "mbpp", "mbppplus")] \
        == [0.2, 0.2, 0.1, 0.1]
    assert [base.decoding_for(s, "gsm8k")[f] for s in ("math", "gsm8k") for f in fields] \
        == [256, 256, "entropy", 0.0, 0.95] * 2
    d3llm = hcfg.model("d3llm-coder").decoding_for("code", "humaneval")
    assert [d3llm[f] for f in ("gen_length", "block_length", "remasking", "temperature")] == [512, 32, "d3llm", 0.0]
    assert d3llm["extra"] == {"d3llm_entropy_threshold": 0.5, "d3llm_block_add_threshold": 0.1,
                              "d3llm_decoded_token_threshold": 0.95, "d3llm_early_stop": True}
