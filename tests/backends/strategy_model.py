"""The network the commit-rule parity fixtures were made with (tests/backends/fixtures/{klass,pc_sampler}_*.json).

The shipped tiny-llada solves Sudoku almost surely, and then every commit rule reaches the same answer, so a
parity test on it would pass with the rule switched off. Seeded Gaussian noise on its weight matrices
(``NOISE`` x each matrix's std) spreads its confidences enough that the rules' orders, and so their tokens,
differ from plain low-confidence decoding. The fixture scripts and the tests build it with this function.
"""

from __future__ import annotations

import torch

from dare.backends.engines.torch import TorchEngine
from dare.harness import config
from dare.harness.engine import EngineContext
from tests.cli_here import dare_eval

NOISE = 1.5
SEED = 0


def noisy_tiny_llada(noise: float = NOISE, seed: int = SEED):
    """A freshly loaded tiny-llada (float32, CPU) whose 2-D weights carry ``noise`` x std seeded noise."""
    model = TorchEngine(EngineContext(model_name="tiny-llada", model_spec=config.model("tiny-llada"),
                                      device="cpu")).model
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, param in sorted(model.net.named_parameters()):
            if param.dim() >= 2:
                param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * noise * param.std())
    return model


def sudoku_prompt_ids(count: int) -> list[list[int]]:
    """Token ids of the first ``count`` Sudoku test prompts, rendered and tokenised as the engine does."""
    from dare.harness import prompts
    from dare.harness.data import load_samples

    engine = TorchEngine(EngineContext(model_name="tiny-llada", model_spec=config.model("tiny-llada"), device="cpu"))
    bench = config.benchmark("sudoku")
    template = prompts.template(bench.prompt)
    return [engine.prompt_ids(template.render(s)) for s in load_samples(bench.data)[:count]]


def assert_dry_run_refused(args: list[str], message: str) -> None:
    """``dare-eval ARGS --suite sudoku --dry-run`` exits 2 with one line holding ``message``, no traceback."""
    done = dare_eval(*args, "--suite", "sudoku", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
