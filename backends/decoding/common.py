"""What every decoder shares: the canvas, per-row randomness, sampling, confidences, commit rules, records.

Shapes: B rows, L canvas length, K window (block) length, V vocabulary, G gen_length.
Randomness is drawn per row from that row's own ``torch.Generator`` and only for the window being
decoded, so a row's output depends on its seed and prompt, never on the batch around it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dare.harness.errors import ConfigError
from dare.harness.options import Options
from dare.harness.records import DecodingConfig

from .stats import greedy_stats

#: the DecodingConfig fields every torch decoder reads
COMMON = frozenset({"gen_length", "steps", "block_length", "remasking", "temperature", "top_p", "top_k", "seed",
                    "stop_at_eos"})


@dataclass
class Canvas:
    """Left-padded prompts followed by G mask tokens and ``tail`` spare slots.

    tokens (B, L) long; valid (B, L) bool (real prompt or generated slot); positions (B, L) long
    (0 at each row's first real token, so a row's RoPE positions do not depend on its padding; LLaDA's
    reference counts pads too, which only shifts all positions by a constant: the same attention scores);
    gen_start = W (the shared prompt width); prompt_len (B,). ``window``: the decoding steps (start, stop) of
    the whole schedule to run on ``tokens``, a state that already ran steps 0..start-1 (None: all of them;
    the fixed-step masked-diffusion loop only, see :func:`.mdm.decode_masked_diffusion`).
    """

    tokens: torch.Tensor
    valid: torch.Tensor
    positions: torch.Tensor
    gen_start: int
    gen_length: int
    prompt_len: torch.Tensor
    window: tuple[int, int] | None = None

    @classmethod
    def build(cls, prompts: list[list[int]], gen_length: int, mask_id: int, pad_id: int, device,
              tail: int = 0) -> Canvas:
        width = max(len(p) for p in prompts)
        total = width + gen_length + tail
        tokens = torch.full((len(prompts), total), pad_id, dtype=torch.long)
        valid = torch.zeros((len(prompts), total), dtype=torch.bool)
        for r, p in enumerate(prompts):
            tokens[r, width - len(p):width] = torch.tensor(p, dtype=torch.long)
            valid[r, width - len(p):width + gen_length] = True
        tokens[:, width:width + gen_length] = mask_id
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)
        lens = torch.tensor([len(p) for p in prompts])
        return cls(tokens.to(device), valid.to(device), positions.to(device), width, gen_length, lens.to(device))

    @property
    def gen_slice(self) -> slice:
        return slice(self.gen_start, self.gen_start + self.gen_length)


@dataclass
class DecodeResult:
    """tokens (B, G); commit_step (B, G) step at which each token was last written (-1: never, filled
    with EOS after an early stop); block (B, G) block index of each token; nfe (B,) forward passes run;
    nfe_official (B,) the passes the official implementation of the decoder family runs for the same
    commits (None: the same as ``nfe``; each decoder documents where they differ)."""

    tokens: torch.Tensor
    commit_step: torch.Tensor
    block: torch.Tensor
    nfe: torch.Tensor
    nfe_official: torch.Tensor | None = None


class LoopOptions(Options):
    """What the decoding loops ask of a decoder's ``extra`` options: ``record_trajectory`` (keep the per-token
    commit steps; also an engine option), the tokens committed per step and the cap on a block's steps.
    A decoder's Options model subclasses this; the defaults here are a uniform schedule and the loop's own cap."""

    record_trajectory: bool = False

    def step_quotas(self, cfg: DecodingConfig, masked: torch.Tensor, steps: int) -> torch.Tensor:
        """Tokens to commit per step (B, steps) for masked counts (B,)."""
        return quota_schedule(masked, steps)

    def max_steps(self, default: int) -> int:
        """The most steps a block may take when a threshold or factor ends it."""
        return default


class DecoderOptions(LoopOptions):
    """``extra`` options of most torch decoders: ``max_steps_per_block`` caps a block's steps (default: the
    loop's own cap)."""

    max_steps_per_block: int | None = None

    def max_steps(self, default: int) -> int:
        return default if self.max_steps_per_block is None else self.max_steps_per_block


def steps_per_block(cfg: DecodingConfig) -> int:
    """``steps`` is the total over the canvas; each of the G/K blocks gets an equal share."""
    n_blocks = cfg.gen_length // cfg.block_length
    if cfg.steps % n_blocks:
        raise ConfigError(f"steps={cfg.steps} is not divisible by the number of blocks "
                          f"{n_blocks} (gen_length / block_length); pick steps as a multiple of it")
    return cfg.steps // n_blocks


def quota_schedule(masked: torch.Tensor, steps: int) -> torch.Tensor:
    """Tokens to commit per step: masked (B,) counts -> (B, steps); base M // S, first M % S steps +1."""
    base = masked[:, None] // steps
    extra = (torch.arange(steps, device=masked.device)[None] < (masked % steps)[:, None]).long()
    return base + extra


def ascending_schedule(masked: torch.Tensor, steps: int) -> torch.Tensor:
    """CJ-GRPO's ascending step sizes (ASS): step k commits 2^k tokens, the last step all the rest.
    masked (B,) counts -> (B, steps), summing to each count; for a full block of K tokens and at most
    :func:`max_ascending_steps` (K) steps the sizes never decrease. Partial windows are filled early."""
    powers = 2 ** torch.arange(1, steps + 1, device=masked.device) - 1  # committed after step k: 2^(k+1) - 1
    done = torch.minimum(powers[None, :], masked[:, None]).clone()
    done[:, -1] = masked
    return torch.diff(done, dim=1, prepend=torch.zeros_like(done[:, :1]))


def max_ascending_steps(length: int) -> int:
    """The most steps an ascending schedule can use for ``length`` tokens (about log2(length))."""
    steps = 1
    while length - (2 ** steps - 1) >= 2 ** (steps - 1):  # the last step still commits at least 2^(n-2)
        steps += 1
    return steps


STEP_SCHEDULES = {"uniform": quota_schedule, "ascending": ascending_schedule}


def step_quotas(cfg: DecodingConfig, schedule: str, masked: torch.Tensor, steps: int) -> torch.Tensor:
    """Tokens per step (B, steps) under the step ``schedule`` (``extra.step_schedule``: uniform or ascending)."""
    if schedule == "ascending" and steps > max_ascending_steps(cfg.block_length):
        raise ConfigError(f"the ascending step schedule fills a block of {cfg.block_length} tokens in at most "
                          f"{max_ascending_steps(cfg.block_length)} steps, not {steps}; lower steps")
    return STEP_SCHEDULES[schedule](masked, steps)


def early_eos_rejection(conf: torch.Tensor, x0: torch.Tensor, step: int, steps: int, cfg: DecodingConfig,
                        eos_gamma: tuple[float, float] | None, schedule: str, model) -> torch.Tensor:
    """CJ-GRPO's EOS early rejection: with ``eos_gamma = [lo, hi]`` (``extra.eos_gamma``) the confidence (B, K) of
    stop-token proposals is scaled by lo + (hi - lo) * progress, progress rising from ~0 to 1 over the block's steps
    (step / (steps - 1); with the ascending schedule the share of the block committed after this step)."""
    if eos_gamma is None:
        return conf
    lo, hi = eos_gamma
    if schedule == "ascending":
        done = ascending_schedule(torch.tensor([cfg.block_length]), steps)[0, :step + 1].sum()
        progress = float(done) / cfg.block_length
    else:
        progress = step / (steps - 1) if steps > 1 else 1.0
    stops = torch.isin(x0, torch.tensor(model.stop_ids, device=x0.device))
    return torch.where(stops, conf * (lo + (hi - lo) * min(progress, 1.0)), conf)


def row_noise(gens: list[torch.Generator], shape: tuple[int, ...], device) -> torch.Tensor:
    """Uniform (0, 1) float64 noise of ``shape`` per row: (B, *shape), row r from ``gens[r]``."""
    noise = torch.stack([torch.rand(shape, generator=g, dtype=torch.float64, device=g.device) for g in gens])
    return noise.clamp_(min=1e-12, max=1 - 1e-12).to(device)


def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Set logits outside the top-k / nucleus top-p set to -inf (the most likely token is always kept)."""
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = (cum - sorted_logits.softmax(-1)) >= top_p  # keep the prefix that first reaches top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample(logits: torch.Tensor, temperature: float, gens: list[torch.Generator], top_k: int | None = None,
           top_p: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Proposals for logits (B, K, V): returns x0 (B, K), p_filtered (B, K), p_unfiltered (B, K).

    T = 0 is argmax with probabilities of the plain softmax. T > 0 is Gumbel-max in float64 over the
    tempered, filtered logits; p_* are the probabilities of x0 under the tempered distributions.
    """
    if temperature == 0:  # filtering never removes the argmax: plain argmax and plain softmax probability
        stats = greedy_stats(logits)
        return stats["x0"], stats["p"], stats["p"]
    logits = logits.double()
    tempered = logits / temperature
    filtered = filter_logits(tempered, top_k, top_p)
    gumbel = -torch.log(-torch.log(row_noise(gens, tuple(logits.shape[1:]), logits.device)))
    x0 = (filtered + gumbel).argmax(-1)
    p_filtered = filtered.softmax(-1).gather(-1, x0[..., None])[..., 0]
    p_unfiltered = tempered.softmax(-1).gather(-1, x0[..., None])[..., 0]
    return x0, p_filtered, p_unfiltered


def top_count(conf: torch.Tensor, candidates: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Per row, the ``count[r]`` most confident candidates: conf/candidates (B, K), count (B,) -> bool (B, K)."""
    conf = conf.masked_fill(~candidates, float("-inf"))
    order = conf.argsort(dim=-1, descending=True, stable=True)
    arange = torch.arange(conf.shape[-1], device=conf.device).expand_as(order)
    ranks = torch.empty_like(order).scatter_(-1, order, arange)
    return (ranks < count[:, None]) & candidates


# What ``threshold`` / ``factor`` mean in a decoder that reads them (``decode.rules``, shown by --dry-run and
# --list, recorded in run.json): the two threshold rules commit different sets for the same confidences.
THRESHOLD_TOP1 = ("commit the most confident masked position plus every masked position with confidence >= threshold "
                  "(Fast-dLLM; steps run until the block is full)")
THRESHOLD_QUOTA = ("commit every masked position with confidence > threshold if there are at least the step's quota "
                   "of them, else the quota most confident (SDAR dynamic, LLaDA2.0); extra.threshold_rule=top1 "
                   "selects the Fast-dLLM rule instead")
THRESHOLD_FLOOR = ("commit every masked position with confidence > threshold (default 0.95) if there are at least "
                   "extra.num_to_transfer of them, else the num_to_transfer most confident (LLaDA2.1)")
THRESHOLD_DINFER = ("commit every masked position whose proposal is not the mask token with confidence >= "
                    "min(threshold, top confidence - 1e-5) (dInfer; default extra.dinfer_threshold)")
THRESHOLD_HIERARCHY = ("commit in each run of adjacent masked positions its most confident if above "
                       "extra.dinfer_low_threshold, every masked position with confidence > threshold, and the most "
                       "confident (dInfer hierarchy)")
FACTOR = ("commit the n most confident masked positions, n the largest with the i-th confidence >= "
          "1 - factor / (i + 1) for every i <= n, at least one (Fast-dLLM)")


def threshold_or_top1(conf: torch.Tensor, candidates: torch.Tensor, tau: float) -> torch.Tensor:
    """Fast-dLLM rule: every candidate with conf >= tau, plus the single best one."""
    best = top_count(conf, candidates, torch.ones(conf.shape[0], dtype=torch.long, device=conf.device))
    return best | (candidates & (conf >= tau))


def threshold_or_quota(conf: torch.Tensor, candidates: torch.Tensor, tau: float, quota: torch.Tensor) -> torch.Tensor:
    """SDAR dynamic / LLaDA2 rule: all candidates with conf > tau if there are at least ``quota`` of
    them, else exactly the top ``quota`` (clamped to the candidates)."""
    above = candidates & (conf > tau)
    enough = above.sum(-1) >= quota
    return torch.where(enough[:, None], above, top_count(conf, candidates, quota))


def factor_rule(conf: torch.Tensor, candidates: torch.Tensor, factor: float) -> torch.Tensor:
    """Fast-dLLM factor rule: the largest n with sorted conf c_i >= 1 - f / (i + 1) for all i < n (n >= 1)."""
    sorted_conf = conf.masked_fill(~candidates, float("-inf")).sort(dim=-1, descending=True).values
    i = torch.arange(conf.shape[-1], device=conf.device, dtype=conf.dtype)
    ok = (sorted_conf >= 1 - factor / (i + 2)).long().cumprod(-1).sum(-1)  # i + 2: the (i+1)-th token, 1-based
    count = ok.clamp(min=1).minimum(candidates.sum(-1))
    return top_count(conf, candidates, count)
