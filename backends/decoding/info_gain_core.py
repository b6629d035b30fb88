"""The Information-Gain sampler's step, on one row: schedule, candidates, look-ahead scoring, commits.

See :mod:`.info_gain` for the method and its reference (yks23/dllm@4cf34a5, dllm/pipelines/info_gain/). Shapes:
T the row's canvas (its prompt, unpadded, then G generated positions), G gen_length, V vocabulary, N candidates.
Positions are indices into the G generated positions; logits (G, V) are those of the generated positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

EOS_PAD_PENALTY = 4.0  # subtracted from the EOS and the PAD logit of every forward
ENTROPY_EPS = 1e-12  # probabilities are clamped here inside the entropy
GUMBEL_EPS = 1e-10  # the reference's smoothing inside the position Gumbel noise
DREAM_CONF_NOISE = 0.1  # Dream at temperature > 0: candidate c >= 1's confidences get this x Gumbel


def transfer_schedule(masked: int, steps: int) -> list[int]:
    """Tokens per step for ``masked`` masks over ``steps`` steps: the reference's linear-alpha schedule
    (``get_num_transfer_tokens``: round(left / (steps - j)) with float32 times, half to even), zeros dropped."""
    quotas, left = [], masked
    for j in range(steps):
        s, t = torch.tensor((steps - j - 1) / steps), torch.tensor((steps - j) / steps)  # float32, as theirs
        keep = ((1 - (1 - s)) / (1 - (1 - t))).item()
        count = min(int(torch.round(torch.tensor(left, dtype=torch.float64) * (1 - keep))), left)
        left -= count
        if count:
            quotas.append(count)
        if not left:
            break
    return quotas


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """(..., V) -> (...): Shannon entropy of the float32 softmax, probabilities clamped at 1e-12."""
    p = logits.float().softmax(-1).clamp(min=ENTROPY_EPS)
    return -(p * p.log()).sum(-1)


def position_gumbel(count: int, generator: torch.Generator, device) -> torch.Tensor:
    """(count,) float32 Gumbel noise, the reference's -log(-log(u + 1e-10) + 1e-10)."""
    u = torch.rand(count, generator=generator, device=generator.device).to(device)
    return -torch.log(-torch.log(u + GUMBEL_EPS) + GUMBEL_EPS)


@dataclass
class Row:
    """One row's decode: tokens (T,), where its generated positions start, its generator and its counters."""

    x: torch.Tensor
    start: int
    generator: torch.Generator
    nfe: int = 0
    step: int = 0

    @property
    def gen(self) -> torch.Tensor:
        return self.x[self.start:]


class LladaProposals:
    """LLaDA's tokens: the (Gumbel-)argmax at ``temperature``, confidence the float32 softmax probability."""

    lower_lookahead = True

    def __init__(self, temperature: float):
        self.temperature = temperature

    def _argmax(self, logits: torch.Tensor, row: Row) -> torch.Tensor:
        if self.temperature == 0:
            return logits.argmax(-1)
        # the reference draws float64 noise over the whole canvas, prompt included: the same stream here
        noise = torch.rand((row.x.shape[0], logits.shape[-1]), generator=row.generator, dtype=torch.float64,
                           device=row.generator.device)
        gumbel = (-torch.log(noise[row.start:].to(logits.device))) ** self.temperature
        return (logits.double().exp() / gumbel).argmax(-1)

    def propose(self, logits, block_masks, row, base=None):
        """logits (G, V) -> x0 (G,), conf (G,) float32 (float32 min outside the block's masks)."""
        if base is not None and self.temperature == 0:
            return base
        x0 = self._argmax(logits, row)
        conf = logits.float().softmax(-1).gather(-1, x0[:, None])[:, 0]
        return x0, conf.masked_fill(~block_masks, torch.finfo(torch.float32).min)

    def fill(self, logits, block_masks, row) -> torch.Tensor:
        """The tokens (G,) a block's last step writes at its masks."""
        return self._argmax(logits, row)


class DreamProposals:
    """Dream's tokens: the argmax of the tempered, top-p then top-k filtered distribution (no sampling),
    confidence its probability; at temperature > 0 a resampled candidate's confidences get 0.1 x Gumbel."""

    def __init__(self, temperature: float, top_p, top_k, quirk: bool):
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.lower_lookahead = not quirk

    def _filtered(self, logits: torch.Tensor):
        """logits (n, V) -> (confidence (n,), token (n,)): the max of the tempered, filtered softmax."""
        if self.temperature > 0:
            logits = logits / self.temperature
        lowest = torch.finfo(logits.dtype).min
        if self.top_p is not None and self.top_p < 1:
            ordered, order = logits.sort(-1, descending=True)
            drop = ordered.softmax(-1).cumsum(-1) > self.top_p
            drop[..., 1:] = drop[..., :-1].clone()  # keep the token that crosses top_p
            drop[..., 0] = False
            logits = logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), lowest)
        if self.top_k is not None:
            kth = logits.topk(min(self.top_k, logits.shape[-1]), -1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, lowest)
        return logits.softmax(-1).max(-1)

    def propose(self, logits, block_masks, row, base=None):
        """logits (G, V) -> x0 (G,), conf (G,) (the dtype's min outside the block's masks); with ``base`` (a
        resampled candidate) the confidences are perturbed at temperature > 0."""
        conf, x0 = self._filtered(logits[block_masks])
        if base is not None and self.temperature > 0:
            u = torch.rand(conf.shape, generator=row.generator, dtype=conf.dtype, device=row.generator.device)
            u = u.to(conf.device)
            conf = conf + DREAM_CONF_NOISE * -torch.log(-torch.log(u + GUMBEL_EPS) + GUMBEL_EPS)
        full = torch.full(block_masks.shape, torch.finfo(logits.dtype).min, dtype=logits.dtype, device=logits.device)
        tokens = torch.zeros(block_masks.shape, dtype=torch.long, device=logits.device)
        return tokens.masked_scatter(block_masks, x0), full.masked_scatter(block_masks, conf)

    def fill(self, logits, block_masks, row) -> torch.Tensor:
        """The tokens (G,) a block's last step writes at its masks."""
        return self.propose(logits, block_masks, row)[0]


def candidates(logits, block_masks, k, opts, proposals, row):
    """The deduplicated actions (positions (k,) each) and their tokens (G,) each (the first is the base)."""
    x0, conf = proposals.propose(logits, block_masks, row)
    valid = torch.where(block_masks)[0]
    n, pos_temp = opts.info_gain_candidates, opts.info_gain_position_temperature
    if len(valid) <= k:
        return [valid], [x0]
    if pos_temp <= 0 or n <= 1:
        return [conf.topk(k).indices], [x0]
    actions, tokens, seen = [], [], set()
    for c in range(n):
        xc, cc = (x0, conf) if c == 0 else proposals.propose(logits, block_masks, row, base=(x0, conf))
        score = cc[valid] if c == 0 else cc[valid] / pos_temp + position_gumbel(len(valid), row.generator, cc.device)
        action = valid[score.topk(min(k, len(valid))).indices]
        key = tuple(sorted(action.tolist()))
        if key not in seen:
            seen.add(key)
            actions.append(action)
            tokens.append(xc)
    return actions, tokens


def bypass(logits, block_masks, k, threshold):
    """(positions, tokens (G,)) of the masked positions whose top-1 probability is >= threshold, at most k
    (most probable first), or None."""
    if threshold is None:
        return None
    top1, x0 = logits.float().softmax(-1).max(-1)
    sure = torch.where((top1 >= threshold) & block_masks)[0]
    if not len(sure):
        return None
    return (sure[top1[sure].topk(k).indices] if len(sure) > k else sure), x0


def forward(model, xs: torch.Tensor, start: int, lower: bool) -> torch.Tensor:
    """Canvases xs (n, T) -> logits (n, G, V) of their generated positions (Dream: read one position earlier),
    EOS and PAD lowered by 4.0 each when ``lower``."""
    shift = 1 if model.arch.shift_logits else 0
    positions = torch.arange(xs.shape[1], device=xs.device).expand(xs.shape[0], -1)
    logits = model.net(xs, positions, None, logits_range=(start - shift, xs.shape[1] - shift))
    if lower:
        logits[..., model.eos_id] -= EOS_PAD_PENALTY
        logits[..., model.pad_id] -= EOS_PAD_PENALTY
    return logits


def look_ahead(model, row: Row, logits, actions, tokens, variant: str, lower: bool):
    """One forward over the N next canvases; returns the winner's index and its look-ahead logits (G, V)."""
    nexts = row.x.expand(len(actions), -1).clone()
    for i, (action, x0) in enumerate(zip(actions, tokens)):
        nexts[i, row.start + action] = x0[action]
    ahead = forward(model, nexts, row.start, lower)
    row.nfe += 1
    still = nexts[:, row.start:] == model.mask_id
    h_next = torch.where(still, entropy(ahead), 0.0).sum(-1) / (still.sum(-1).float() + 1e-10)
    objective = -h_next
    if variant == "info_gain":
        now = entropy(logits)
        objective = objective - torch.stack([now[a].sum() for a in actions])
    best = int(objective.argmax())
    return best, ahead[best]


def commit(model, row: Row, positions, x0, commit_step):
    """Write x0 at ``positions``; then every mask after the row's first EOS becomes EOS."""
    row.gen[positions] = x0[positions]
    commit_step[positions] = row.step
    row.step += 1
    eos = torch.where(row.gen == model.eos_id)[0]
    if len(eos):
        tail = row.gen[int(eos[0]) + 1:]
        tail[tail == model.mask_id] = model.eos_id


def decode_row(model, row: Row, block: int, steps: int, opts, proposals) -> torch.Tensor:
    """Decode ``row`` in blocks of ``block`` positions with ``steps`` steps each; returns commit steps (G,)."""
    gen = row.gen.shape[0]
    commit_step = torch.full((gen,), -1, dtype=torch.long, device=row.x.device)
    for lo in range(0, gen, block):
        in_block = torch.zeros(gen, dtype=torch.bool, device=row.x.device)
        in_block[lo:lo + block] = True
        ahead = None
        for k in transfer_schedule(int((row.gen[lo:lo + block] == model.mask_id).sum()), steps):
            block_masks = in_block & (row.gen == model.mask_id)
            if not block_masks.any():
                break
            logits = ahead if ahead is not None else forward(model, row.x[None], row.start, True)[0]
            row.nfe += ahead is None
            ahead = None
            if k >= int(block_masks.sum()):  # the block's last step: fill every mask
                commit(model, row, torch.where(block_masks)[0], proposals.fill(logits, block_masks, row), commit_step)
                break
            sure = bypass(logits, block_masks, k, opts.info_gain_threshold)
            if sure is not None:
                commit(model, row, *sure, commit_step)
            else:
                actions, tokens = candidates(logits, block_masks, k, opts, proposals, row)
                best = 0
                if len(actions) > 1:
                    best, ahead = look_ahead(model, row, logits, actions, tokens, opts.info_gain_variant,
                                             proposals.lower_lookahead)
                commit(model, row, actions[best], tokens[best], commit_step)
    return commit_step
