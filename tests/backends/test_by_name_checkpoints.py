"""Checkpoints known by name on an architecture DARE has: their prompts render as their authors build them, byte
for byte, and their special ids are their authors'.

TraDo (Gen-Verse/dLLM-RL@10b4fd1) and DiRL (OpenMOSS/DiRL@ec4bfb3) are SDAR-4B/8B-Chat trained further: their
tokenizer files are on the Hugging Face hub only, so the renders use SDAR-8B-Chat's real tokenizer and chat template
(the project's shared hub metadata), which they inherit, and compare with the prompt strings the authors' evaluation
code writes by hand (sample/trado_sample.py, eval/eval_lmdeploy.py). TraDo's README question is the worked example.

The Dream-architecture code checkpoints (DiffuCoder, Dream-Coder, d3LLM-Dream-Coder) have their tokenizer files on the
hub only too: their renders and ids use Dream-v0-Instruct-7B's real tokenizer files (Qwen2.5's vocabulary with
Dream's specials), and each authors' own example query.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dare.backends.models.loader import detect_architecture, resolve_special_ids
from dare.backends.models.tokenizer import load_tokenizer, render_prompt, use_chat_template
from dare.harness import config

HUB = Path(os.environ.get("DARE_HUB_CONFIGS") or Path(__file__).resolve().parents[3] / "shared" / "hub_configs")
pytestmark = pytest.mark.skipif(not HUB.is_dir(), reason="hub checkpoint metadata not available here")

QUESTION = "What's the solution of x^2 - 2x + 1 = 0"  # Gen-Verse/dLLM-RL README.md
# sample/trado_sample.py: the chain-of-thought math prompt, and the one of start_with_think (the Thinking model)
TRADO_COT = ("<|im_start|>user\n{problem}\nPlease reason step by step, and put your final answer within "
             "\\boxed{{}}.<|im_end|>\n<|im_start|>assistant\n")
TRADO_THINK = ("<|im_start|>user\nYou need to put your final answer in \\boxed{{}}. This is the problem:\n{problem}"
               "<|im_end|>\n<|im_start|>assistant<think>\n")
TRADO_MASK_ID = 151669  # sample/trado_sample.py mask_token_id, README block_diffusion_generate(mask_id=...)
# OpenMOSS/DiRL@ec4bfb3 eval/eval_lmdeploy.py: reason_prompt (start_with_think off, as configs/eval.yaml sets it)
DIRL = ("<|im_start|>user\n{problem}\nPlease reason step by step, and put your final answer within $\\boxed{{}}$."
        "<|im_end|>\n<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def sdar_tokenizer():
    return load_tokenizer(HUB / "SDAR-8B-Chat")


def _render(tok, name: str, content: str) -> str:
    spec = config.model(name)
    tok.chat_template = (HUB / "SDAR-8B-Chat" / "chat_template.jinja").read_text()  # the checkpoint's own
    return render_prompt(tok, [{"role": "user", "content": content}], use_chat_template(tok, spec))


@pytest.mark.parametrize("name", ["trado-4b-instruct", "trado-8b-instruct"])
def test_trado_instruct_renders_the_authors_prompt(sdar_tokenizer, name):
    content = f"{QUESTION}\nPlease reason step by step, and put your final answer within \\boxed{{}}."
    assert _render(sdar_tokenizer, name, content) == TRADO_COT.format(problem=QUESTION)


def test_trado_thinking_opens_the_answer_with_think_as_the_authors_do(sdar_tokenizer):
    content = f"You need to put your final answer in \\boxed{{}}. This is the problem:\n{QUESTION}"
    assert _render(sdar_tokenizer, "trado-8b-thinking", content) == TRADO_THINK.format(problem=QUESTION)


def test_dirl_renders_the_authors_prompt(sdar_tokenizer):
    content = f"{QUESTION}\nPlease reason step by step, and put your final answer within $\\boxed{{}}$."
    assert _render(sdar_tokenizer, "dirl-8b-instruct", content) == DIRL.format(problem=QUESTION)


@pytest.mark.parametrize("name,base", [("trado-4b-instruct", "SDAR-4B-Chat"), ("trado-8b-instruct", "SDAR-8B-Chat"),
                                       ("trado-8b-thinking", "SDAR-8B-Chat"), ("dirl-8b-instruct", "SDAR-8B-Chat")])
def test_sdar_based_special_ids_are_the_authors(sdar_tokenizer, name, base):
    """TraDo's and DiRL's mask id is SDAR's (both pass 151669 or SDAR's config), their answers end at <|im_end|>."""
    spec = config.model(name)
    hub_config = json.loads((HUB / base / "config.json").read_text())
    assert detect_architecture(hub_config).name == spec.architecture == "sdar"
    mask, eos, _, stops = resolve_special_ids(detect_architecture(hub_config), hub_config, sdar_tokenizer,
                                              hub_config["vocab_size"], spec.mask_id, spec.eos_id)
    assert mask == TRADO_MASK_ID == hub_config["mask_token_id"]
    assert eos == sdar_tokenizer.convert_tokens_to_ids("<|endoftext|>")  # the README strips it from the answer
    assert sdar_tokenizer.convert_tokens_to_ids("<|im_end|>") in stops  # trado_longcot_eval.yaml stop_token_list


# hao-ai-lab/d3LLM@e5bfcac: the worked example of d3llm/d3llm_LLaDA/d3llm_llada_generate_util.py (rendered there with
# the checkpoint's chat template, as chat/chat_d3llm_{llada,dream}.py and the distillation scripts do) and the mask
# ids its generate and training code fix (mask_id=126336; mask_token_id=151666)
D3LLM_QUESTION = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How "
                  "many clips did Natalia sell altogether in April and May? Please reason step by step, and put your "
                  "final answer within \\boxed{}.")
D3LLM = {"d3llm-llada": ("LLaDA-8B-Instruct", 126336,
                         "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n"),
         "d3llm-dream": ("Dream-v0-Instruct-7B", 151666,
                         "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
                         "<|im_start|>assistant\n")}


def _base_tokenizer(base: str, tmp_path: Path):
    """The base checkpoint's real tokenizer; LLaDA's tokenizer.json is not offline, so its real
    tokenizer_config.json (chat template, special tokens) over a byte-level vocabulary with its special tokens."""
    if (HUB / base / "vocab.json").is_file():
        return load_tokenizer(HUB / base)
    from dare.backends.models.tiny import write_tokenizer

    real = json.loads((HUB / base / "tokenizer_config.json").read_text())
    specials = [t["content"] for t in real["added_tokens_decoder"].values()]
    write_tokenizer(tmp_path, specials, {}, "")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(real))
    return load_tokenizer(tmp_path)


@pytest.mark.parametrize("name", sorted(D3LLM))
def test_d3llm_renders_the_authors_worked_example_and_keeps_their_mask_id(name, tmp_path):
    base, mask_id, prompt = D3LLM[name]
    spec = config.model(name)
    tok = _base_tokenizer(base, tmp_path)
    rendered = render_prompt(tok, [{"role": "user", "content": D3LLM_QUESTION}], use_chat_template(tok, spec))
    assert rendered == prompt.format(q=D3LLM_QUESTION)
    hub_config = json.loads((HUB / base / "config.json").read_text())
    assert detect_architecture(hub_config).name == spec.architecture
    mask, eos, _, _ = resolve_special_ids(detect_architecture(hub_config), hub_config, tok,
                                          hub_config.get("vocab_size", 1 << 20), spec.mask_id, spec.eos_id)
    assert mask == mask_id and eos == hub_config["eos_token_id"]


@pytest.mark.parametrize("name", sorted(D3LLM))
def test_d3llm_decoding_options_are_valid_for_its_decoder(name):
    from dare.backends.decoding.d3llm import D3llmOptions

    spec = config.model(name)
    for key, entry in spec.decoding.items():
        options = D3llmOptions(**(entry.get("extra") or spec.decoding["default"]["extra"]))
        assert options.d3llm_block_add_threshold == 0.1 and options.d3llm_decoded_token_threshold == 0.95, key


def test_mmada_renders_the_authors_text_prompt_on_llada_s_tokenizer(tmp_path):
    """Gen-Verse/MMaDA@3cdb870 generate.py main(): its template over LLaDA's tokenizer (MMaDA's text tokenizer is
    LLaDA-8B-Instruct's; the rendered worked example is kept in fixtures/mmada_official.json); mask_id 126336 is the
    constant of its models/modeling_mmada.py."""
    fixture = json.loads((Path(__file__).parent / "fixtures" / "mmada_official.json").read_text())
    spec = config.model("mmada-8b-mixcot")
    tok = _base_tokenizer("LLaDA-8B-Instruct", tmp_path)
    rendered = render_prompt(tok, [{"role": "user", "content": fixture["questions"][0]}], use_chat_template(tok, spec))
    assert rendered == fixture["prompt_texts"][0]
    hub_config = json.loads((HUB / "LLaDA-8B-Instruct" / "config.json").read_text())
    assert (spec.mask_id, spec.eos_id) == (126336, hub_config["eos_token_id"])


# The Dream-architecture code checkpoints. Their tokenizer files are on the hub only: the renders and ids use
# Dream-v0-Instruct-7B's real tokenizer (Qwen2.5's vocabulary and merges with Dream's <|beginoftext|> and <|mask|>),
# whose chat template the coder checkpoints keep (DiffuCoder's cards: "we reuse Dream's modeling architecture and
# generation utils"). DiffuCoder-Instruct/-cpGRPO add <|dlm_pad|>: added here for the stop-token check only; its id
# is whatever the real checkpoint's tokenizer gives it (the model config names it by text).
DIFFUCODER_QUERY = "Write a function to find the shared elements from the given two lists."  # README's MBPP example
# apple/ml-diffucoder@f735e01 inference_demo.py and README.md "Usage for Instruct model": the prompt written by hand
DIFFUCODER = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{q}\n<|im_end|>\n"
              "<|im_start|>assistant\n")
# README.md "Usage for Base model": a HumanEval prompt, tokenized as it is (no template)
DIFFUCODER_BASE = "\n".join([
    "", "from typing import List", "", "def has_close_elements(numbers: List[float], threshold: float) -> bool:",
    '    """',
    "    Check if in given list of numbers, are any two numbers closer to each other than given threshold.",
    "    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)", "    False",
    "    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)", "    True", '    """', ""])
DREAM_CODER_QUERY = "Write a quick sort algorithm."  # DreamLM/Dream-Coder@87409da README.md quickstart
# what its apply_chat_template(..., add_generation_prompt=True) gives with the Qwen2.5 template Dream ships (its
# LiveCodeBench prompts write the same system turn: code_eval/lcb/lcb_runner/prompts/code_generation.py)
DREAM_CODER = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
               "<|im_start|>assistant\n")
DREAM_MASK_ID, QWEN_EOS_ID = 151666, 151643  # hub config.json of DiffuCoder-7B-Instruct@69c039a; Dream-Coder's code


@pytest.fixture(scope="module")
def dream_tokenizer():
    return load_tokenizer(HUB / "Dream-v0-Instruct-7B")


def _render_for(tok, name: str, content: str) -> str:
    """The prompt with the checkpoint's own template, unless the model config installs its file over it."""
    tok.chat_template = json.loads((HUB / "Dream-v0-Instruct-7B" / "tokenizer_config.json").read_text())[
        "chat_template"]
    return render_prompt(tok, [{"role": "user", "content": content}], use_chat_template(tok, config.model(name)))


@pytest.mark.parametrize("name", ["diffucoder-7b-instruct", "diffucoder-7b-cpgrpo"])
def test_diffucoder_renders_the_authors_hand_written_prompt(dream_tokenizer, name):
    """The user turn is the stripped query and a newline before <|im_end|>, which the tokenizer's template omits."""
    assert _render_for(dream_tokenizer, name, f"  {DIFFUCODER_QUERY}\n") == DIFFUCODER.format(q=DIFFUCODER_QUERY)


def test_diffucoder_base_prompt_is_the_raw_code(dream_tokenizer):
    assert _render_for(dream_tokenizer, "diffucoder-7b-base", DIFFUCODER_BASE) == DIFFUCODER_BASE


@pytest.mark.parametrize("name", ["dream-coder-v0-instruct-7b", "d3llm-dream-coder"])
def test_dream_coder_renders_its_chat_template(dream_tokenizer, name):
    assert _render_for(dream_tokenizer, name, DREAM_CODER_QUERY) == DREAM_CODER.format(q=DREAM_CODER_QUERY)


@pytest.mark.parametrize("name", ["diffucoder-7b-base", "diffucoder-7b-instruct", "diffucoder-7b-cpgrpo",
                                  "dream-coder-v0-base-7b", "dream-coder-v0-instruct-7b", "d3llm-dream-coder"])
def test_dream_coder_checkpoints_keep_dream_s_ids_and_diffucoder_stops_at_its_pad(name):
    """Mask 151666 and EOS 151643 as the authors' configs set them; the Instruct/cpGRPO answers also end at
    <|dlm_pad|>, the Base models' at EOS and <|im_end|> only."""
    spec = config.model(name)
    tok = load_tokenizer(HUB / "Dream-v0-Instruct-7B")
    tok.add_special_tokens({"additional_special_tokens": ["<|dlm_pad|>"]})
    hub_config = json.loads((HUB / "Dream-v0-Instruct-7B" / "config.json").read_text())
    arch = detect_architecture(hub_config)
    assert arch.name == spec.architecture == "dream"
    mask, eos, _, stops = resolve_special_ids(arch, hub_config, tok, hub_config["vocab_size"], spec.mask_id,
                                              spec.eos_id, spec.stop_tokens)
    assert (mask, eos) == (DREAM_MASK_ID, QWEN_EOS_ID) == (hub_config["mask_token_id"], hub_config["eos_token_id"])
    assert (tok.convert_tokens_to_ids("<|dlm_pad|>") in stops) == name.startswith(("diffucoder-7b-instruct",
                                                                                  "diffucoder-7b-cpgrpo"))
