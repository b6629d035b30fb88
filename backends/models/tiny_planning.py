"""Initial (untrained) checkpoints of the project's *trained* tiny models: the shipped ``tiny-llada``,
``tiny-sdar`` and ``tiny-dream-sudoku`` (Sudoku), and ``tiny-llada-long`` (long addition written column by
column, 154-token answers).

They differ from the random test checkpoints of :mod:`.tiny` in two ways: a few million parameters instead
of a few thousand, and a BPE tokenizer trained on the planning suites' train prompts and gold answers, so
the long, fixed prompt templates become ~60 tokens and the model spends its capacity on the puzzle. The
weights are then trained by the project's own recipes (configs/experiments/tiny_*_sudoku_sft.yaml)::

    python -m dare.backends.models.tiny_planning tiny-llada /tmp/tiny-llada-init
    dare-train --config tiny_llada_sudoku_sft --model-path /tmp/tiny-llada-init --out runs
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dare.harness.verifiers  # noqa: F401  (registers the verifiers)
from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.prompts import template
from dare.harness.registry import verifiers

from .tiny import write_tiny_checkpoint

PLANNING = ("sudoku", "countdown")

# name -> (architecture, config overrides of the tiny family config): every initial checkpoint this module writes
INITIAL: dict[str, tuple[str, dict]] = {
    "tiny-llada": ("llada", {"d_model": 192, "n_heads": 6, "n_kv_heads": 6, "n_layers": 4,
                             "mlp_hidden_size": 512, "max_sequence_length": 512}),
    "tiny-sdar": ("sdar", {"hidden_size": 192, "head_dim": 32, "num_attention_heads": 6, "num_key_value_heads": 2,
                           "num_hidden_layers": 4, "intermediate_size": 512, "max_position_embeddings": 512}),
    "tiny-dream-sudoku": ("dream", {"hidden_size": 192, "num_attention_heads": 6, "num_key_value_heads": 2,
                                    "num_hidden_layers": 4, "intermediate_size": 512, "max_position_embeddings": 512}),
}
INITIAL["tiny-llada-long"] = INITIAL["tiny-llada"]
TRAINED = {name: INITIAL[name] for name in ("tiny-llada", "tiny-sdar", "tiny-llada-long", "tiny-dream-sudoku")}
"""The shipped trained models (configs/models/<name>/ holds their weights, recipe and log); a model joins once
its weights are shipped."""
TRAINED_ON = {"tiny-llada": "sudoku", "tiny-sdar": "sudoku", "tiny-llada-long": "long_addition",
              "tiny-dream-sudoku": "sudoku"}
"""The benchmark each trained model learned (its recipe's suite)."""
BYTE_LEVEL = frozenset({"tiny-llada-long"})
"""Models whose tokenizer is the bare byte-level one (one token per character), not the planning BPE."""


def planning_corpus(rows_per_benchmark: int = 2000) -> Iterator[str]:
    """Prompt texts and gold completions of the first rows of each planning train split (tokenizer training)."""
    yield "user assistant system"
    for name in PLANNING:
        spec = cfg.benchmark(name)
        prompt = template(spec.prompt)
        verifier = verifiers.get(spec.verifier)()
        try:
            for sample in load_samples(spec.train)[:rows_per_benchmark]:
                yield "\n".join(m.content for m in prompt.render(sample))
                gold = verifier.gold_completion(sample)
                if gold:
                    yield gold
        finally:
            verifier.close()


def write_initial(name: str, directory: str | Path, seed: int = 0) -> Path:
    """The untrained starting checkpoint of the trained model ``name`` (a key of :data:`INITIAL`)."""
    arch, overrides = INITIAL[name]
    corpus = None if name in BYTE_LEVEL else planning_corpus()
    return write_tiny_checkpoint(arch, directory, seed=seed, std=0.02, config_overrides=overrides,
                                 tokenizer_corpus=corpus, tokenizer_vocab=1024)


if __name__ == "__main__":
    import sys

    print(write_initial(sys.argv[1], sys.argv[2]))
