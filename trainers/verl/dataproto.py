"""RolloutBatch <-> verl ``DataProto``: the batch record that travels between the driver and the workers.

Every tensor gets its batch dimension first, as ``DataProto.chunk`` splits dimension 0 into contiguous
per-rank parts: ``old_logp`` / ``ref_logp`` (S, B, T) travel as (B, S, T); the estimator draws ``noise``
(S dicts of (B, ...) tensors) travel flattened as ``noise.<s>.<key>``. ``extras`` stay on the driver.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch

from ..batch import RolloutBatch

_S_MAJOR = ("old_logp", "ref_logp")
_NOISE = "noise."


def to_dataproto(batch: RolloutBatch, meta_info: dict | None = None):
    """A ``DataProto`` whose rows are the rows of ``batch`` (CPU tensors)."""
    from verl import DataProto

    tensors: dict[str, torch.Tensor] = {}
    for f in fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, torch.Tensor):
            value = value.transpose(0, 1) if f.name in _S_MAJOR else value
            tensors[f.name] = value.detach().cpu().contiguous()
    for s, draw in enumerate(batch.noise):
        for key, value in draw.items():
            tensors[f"{_NOISE}{s}.{key}"] = value.detach().cpu().contiguous()
    # estimators without random draws have empty noise dicts: the count travels in meta_info
    return DataProto.from_dict(tensors=tensors, meta_info={**(meta_info or {}), "noise_sets": len(batch.noise)})


def from_dataproto(data, device: torch.device | str = "cpu") -> RolloutBatch:
    """The :class:`RolloutBatch` of one ``DataProto`` (e.g. a rank's chunk), on ``device``."""
    plain: dict[str, torch.Tensor] = {}
    noise: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in data.batch.items():
        value = value.to(device)
        if key.startswith(_NOISE):
            s, _, name = key[len(_NOISE):].partition(".")
            noise.setdefault(int(s), {})[name] = value
        else:
            plain[key] = value.transpose(0, 1) if key in _S_MAJOR else value
    count = data.meta_info.get("noise_sets", len(noise))
    return RolloutBatch(**plain, noise=[noise.get(s, {}) for s in range(count)])


def object_array(values: list) -> np.ndarray:
    """A 1-D object array for ``DataProto.non_tensor_batch`` (records such as requests and generations).

    Filled element by element: ``np.array`` would try to unpack records that look like sequences."""
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out
