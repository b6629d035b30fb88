"""The trainable policy: a :class:`~dare.backends.models.transformer.DiffusionTransformer` plus what the
estimators need (special ids, attention kind, block size, Dream's logit shift).

Log-probabilities are computed *logits-free*: the final hidden states of the requested positions are
multiplied by the LM head in chunks, each chunk under activation checkpointing, so the full (N, V) logits
of a 126k-152k vocabulary are never kept for the backward pass (only one chunk at a time exists).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from dare.backends.models.attention import resolve

from .packing import pack


def _chunk_logp(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor):
    """hidden (n, H), weight (V, H), targets (n,) -> log p(target) (n,) and entropy (n,) in float32."""
    logits = (hidden @ weight.T).float()
    logp_all = logits.log_softmax(-1)
    logp = logp_all.gather(-1, targets[:, None])[:, 0]
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy.detach()


def linear_logp(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked, logits-free log p(targets): hidden (N, H), weight (V, H), targets (N,) -> (N,), (N,)."""
    if hidden.shape[0] == 0:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    outs = []
    for start in range(0, hidden.shape[0], chunk):
        part = (hidden[start:start + chunk], weight, targets[start:start + chunk])
        if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
            outs.append(checkpoint(_chunk_logp, *part, use_reentrant=False))
        else:
            outs.append(_chunk_logp(*part))
    return torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])


class ModelPolicy(nn.Module):
    """A loaded dLLM (``dare.backends.models.loader.LoadedModel``) made trainable.

    ``block_size`` is None for bidirectional (masked-diffusion) models, else the block length K used by
    both rollout and training (the decoding's ``block_length``). ``kernel`` names the attention kernel of
    training forwards (see :func:`training_kernel`); rollout decoding keeps the model's own.
    """

    def __init__(self, loaded, block_size: int | None = None, chunk: int = 1024, packed: bool = False,
                 kernel: str | None = None):
        super().__init__()
        self.loaded = loaded
        self.net = loaded.net
        self.attention = loaded.arch.attention
        self.shift_logits = bool(loaded.arch.shift_logits)
        self.mask_id, self.pad_id, self.eos_id = loaded.mask_id, loaded.pad_id, loaded.eos_id
        self.stop_ids = tuple(loaded.stop_ids)
        default_block = loaded.config.get("block_size") or loaded.arch.block_size
        self.block_size = (block_size or default_block) if self.attention == "block_causal" else None
        self.chunk = chunk
        self.packed = packed
        self.kernel = kernel  # attention kernel of training forwards (None: the model's own)

    @property
    def device(self) -> torch.device:
        return self.net.lm_head.weight.device

    def hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Final normed hidden states (B, L, H): the network without its LM head (applied chunked later)."""
        if self.kernel is None:
            return self.net.hidden_states(input_ids, positions, mask)
        with self.net.attention_kernel(self.kernel):
            return self.net.hidden_states(input_ids, positions, mask)

    def token_logp(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                   index: torch.Tensor, targets: torch.Tensor,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """log p(targets) at sequence positions ``index`` and the predictive entropy there, from the logits
        divided by ``temperature``.

        input_ids/positions (B, L); mask (B, 1, L, L) | None; index/targets (B, N) -> (B, N), (B, N).
        With Dream's shift the distribution for position i is read from hidden state i - 1.
        """
        source = (index - 1).clamp(min=0) if self.shift_logits else index
        if self.packed and mask is not None:
            picked = self._packed_hidden(input_ids, positions, mask, source)
        else:
            h = self.hidden(input_ids, positions, mask)
            picked = h.gather(1, source[..., None].expand(-1, -1, h.shape[-1]))
        if temperature != 1.0:  # (h / tau) W^T = logits / tau, without materialising the logits
            picked = picked / temperature
        logp, entropy = linear_logp(picked.reshape(-1, picked.shape[-1]), self.net.lm_head.weight,
                                    targets.reshape(-1), self.chunk)
        return logp.view(targets.shape), entropy.view(targets.shape)

    def _packed_hidden(self, input_ids, positions, mask, source) -> torch.Tensor:
        """Hidden states (B, N, H) at ``source`` computed on a padding-free packing of the batch."""
        none = torch.zeros(input_ids.shape, dtype=torch.bool, device=input_ids.device)
        packing = pack(input_ids, positions, mask.expand(-1, -1, input_ids.shape[1], -1), none)
        h = self.hidden(packing.ids, packing.positions, packing.mask)
        # padding read out as a target was dropped: any slot stands in (its log-prob is masked by the caller)
        slot = packing.where.gather(1, source[..., None].expand(-1, -1, 2)).clamp(min=0)  # (B, N, 2)
        return h[slot[..., 0], slot[..., 1]]


def training_kernel(requested: str, attention: str, device: torch.device | str) -> str | None:
    """The attention kernel for training forwards: ``auto`` takes FlexAttention for block-diffusion models on
    CUDA (the [noisy | clean] mask is mostly empty, so block-sparse kernels skip most of it) and leaves
    everything else on the model's kernel (SDPA on CPU, where FlexAttention has no backward)."""
    if requested != "auto":
        return resolve(requested, device)  # flex on a CPU fails here, before any work
    return "flex" if attention == "block_causal" and torch.device(device).type == "cuda" else None

