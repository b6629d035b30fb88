"""The generated long-addition task: generator, shipped files, verifier, tokenizer and configs.

The written work of 482137 + 396715 and 999999 + 100001 below is worked by hand from the rule in
``dare.harness.generators.long_addition`` (x digit = column sum mod 10, y digit = '*' carry or '.' none).
"""

from __future__ import annotations

import hashlib
import random

import pytest

from dare.harness import cli
from dare.harness import config as cfg
from dare.harness.data import load_samples, manifest
from dare.harness.generators import long_addition as gen
from dare.harness.prompts import template
from dare.harness.records import Sample
from dare.harness.verifiers import verifiers
from dare.harness.verifiers.long_addition import LongAdditionVerifier, digit_credit, work_steps

HAND = {
    ("482137", "396715"): ["0482137+0396715", "0482132+039671*", "0482152+03967.*", "0482852+0396..*",
                           "0488852+039...*", "0478852+03*...*", "0878852+0.*...*", "0878852+..*...*"],
    ("999999", "100001"): ["0999999+0100001", "0999990+010000*", "0999900+01000**", "0999000+0100***",
                           "0990000+010****", "0900000+01*****", "0100000+0******", "1100000+.******"],
}


def sample(a: str, b: str) -> Sample:
    return Sample(id="x", prompt=gen.question(a, b), reference=str(int(a) + int(b)), metadata={"a": a, "b": b})


@pytest.fixture(scope="module")
def verifier():
    return LongAdditionVerifier()


@pytest.fixture(scope="module")
def rows():
    return {split: load_samples(f"long_addition_{split}.jsonl") for split in ("test", "train")}


@pytest.mark.parametrize("operands", list(HAND))
def test_work_lines_match_the_hand_worked_additions(operands):
    assert gen.work_lines(*operands) == HAND[operands]
    total = str(int(operands[0]) + int(operands[1]))
    assert gen.gold_completion(*operands) == "\n".join(HAND[operands]) + f"\n<answer>\n{total}\n</answer>"


def test_the_generator_rebuilds_the_shipped_files_byte_for_byte():
    built = gen.make_rows(gen.SEED)
    for split, count in (("test", gen.TEST_ROWS), ("train", gen.TRAIN_ROWS)):
        text = gen.file_text(built[split]).encode()
        name = f"long_addition_{split}.jsonl"
        assert len(built[split]) == count
        assert hashlib.sha256(text).hexdigest() == manifest()[name]
        assert (gen.DATA_DIR / name).read_bytes() == text
    other = gen.file_text(gen.make_rows(gen.SEED + 1)["test"]).encode()
    assert hashlib.sha256(other).hexdigest() != manifest()["long_addition_test.jsonl"]


def test_splits_are_disjoint_six_digit_and_long(rows):
    pairs = {split: {(s.metadata["a"], s.metadata["b"]) for s in rs} for split, rs in rows.items()}
    assert len(pairs["test"]) == 500 and len(pairs["train"]) == 8000 and not pairs["test"] & pairs["train"]
    for s in rows["test"]:
        a, b = s.metadata["a"], s.metadata["b"]
        assert len(a) == len(b) == 6 and a[0] != "0" != b[0] and s.reference == str(int(a) + int(b))
        assert len(gen.gold_completion(a, b)) >= 128


def test_gold_completions_score_full_marks_on_every_row(verifier, rows):
    for s in rows["test"] + rows["train"]:
        v = verifier(s, verifier.gold_completion(s))
        assert v.passed and v.score == 1.0 and v.details["partial_credit"] == 1.0 and v.details["work_steps"] == 1.0


def test_one_changed_answer_digit_scores_zero(verifier, rows):
    rng = random.Random(0)
    for s in rows["test"]:
        i = rng.randrange(len(s.reference))
        wrong = s.reference[:i] + str((int(s.reference[i]) + rng.randint(1, 9)) % 10) + s.reference[i + 1:]
        gold = verifier.gold_completion(s)
        v = verifier(s, gold.replace(f"<answer>\n{s.reference}\n", f"<answer>\n{wrong}\n"))
        assert not v.passed and v.score == 0.0 and v.details["partial_credit"] < 1.0
        assert v.details["work_steps"] == 1.0  # the work was right; only the answer counts


def test_partial_credit_and_step_credit_by_hand(verifier):
    s = sample("482137", "396715")
    assert verifier(s, "<answer>878853</answer>").details["partial_credit"] == pytest.approx(6 / 7)
    assert verifier(s, "<answer>0878852</answer>").passed  # leading zeros allowed
    assert digit_credit("12345678", "878852", 7) == 0.0 and digit_credit("87x852", "878852", 7) == 0.0
    lines = list(HAND[("482137", "396715")])
    assert work_steps("\n".join(lines), "482137", "396715") == 1.0
    lines[-1] = "0878852+.**...*"  # the leading column's carry mark wrong: only the last step fails
    assert work_steps("\n".join(lines), "482137", "396715") == pytest.approx(7 / 8)
    assert work_steps("<answer>878852</answer>", "482137", "396715") == 0.0
    v = verifier(s, "no answer")
    assert not v.passed and v.answer is None and v.details["partial_credit"] == 0.0


def test_the_verifier_is_registered_and_the_configs_load():
    assert verifiers.get("long_addition") is LongAdditionVerifier
    spec = cfg.benchmark("long_addition")
    assert (spec.verifier, spec.prompt, spec.data, spec.train) == (
        "long_addition", "dare_long_addition", "long_addition_test.jsonl", "long_addition_train.jsonl")
    assert "long_addition" in cfg.suite("long_canvas").benchmarks
    text = template(spec.prompt).render(sample("482137", "396715"))[0].content
    assert text.startswith("Add 482137 and 396715.")


@pytest.fixture(scope="module")
def initial(tmp_path_factory):
    from dare.backends.models.tiny_planning import write_initial

    return write_initial("tiny-llada-long", tmp_path_factory.mktemp("tiny-llada-long"))


def test_the_tokenizer_round_trips_every_row_one_token_per_character(initial, verifier, rows):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(initial))
    for s in rows["test"] + rows["train"]:
        for text in (verifier.gold_completion(s), s.prompt):
            ids = tok(text, add_special_tokens=False)["input_ids"]
            assert len(ids) == len(text) and tok.decode(ids) == text


def test_dry_run_resolves_the_suite(initial, capsys, tmp_path):
    code = cli.main(["--model-path", str(initial), "--suite", "long_canvas", "--limit", "2", "--no-progress",
                     "--out", str(tmp_path), "--dry-run", "--set", "gen_length=160", "--set", "block_length=32",
                     "--set", "steps=160"])
    out = capsys.readouterr().out
    assert code == 0
    assert "long_addition: data long_addition_test.jsonl sha256 " + manifest()["long_addition_test.jsonl"] in out
    assert not list(tmp_path.glob("*"))


def test_the_recipe_trains_masked_diffusion_on_a_long_canvas_of_several_blocks():
    from dare.trainers.training.config import load_experiment

    recipe = load_experiment("tiny_llada_long_sft", {})
    d = recipe.decoding
    assert (recipe.algorithm, recipe.suite, recipe.lr, recipe.lr_schedule) == ("sft", "long_addition", 5e-4, "cosine")
    assert (d["gen_length"] >= 160 and d["gen_length"] % d["block_length"] == 0
            and d["gen_length"] // d["block_length"] >= 4)
    longest = max(len(gen.gold_completion(s.metadata["a"], s.metadata["b"]))
                  for s in load_samples("long_addition_train.jsonl"))
    assert longest + 1 <= d["gen_length"]  # the work, the answer and one EOS fit the canvas
