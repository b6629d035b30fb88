"""Diffusion decoders. Importing this package registers them lazily in ``dare.harness.registry.decoders``
as ``<family>:<remasking>`` (see :mod:`.entries`), and the KV caches every masked-diffusion rule runs
under in ``registry.caches`` as ``DecodingConfig.cache`` names (see :class:`.fastdllm.CacheStrategy`)."""

from dare.harness.registry import caches, decoders

_ENTRIES = {
    "mdm:low_confidence": ("llada_low_confidence", ()),
    "mdm:random": ("llada_random", ()),
    "mdm:pc_sampler": ("llada_pc_sampler", ()),
    "mdm:klass": ("llada_klass", ()),
    "mdm:dpad": ("llada_dpad", ()),
    "dream:origin": ("dream_origin", ()),
    "dream:maskgit_plus": ("dream_maskgit_plus", ("dream:low_confidence",)),
    "dream:topk_margin": ("dream_topk_margin", ("dream:margin",)),
    "dream:entropy": ("dream_entropy", ()),
    "block:low_confidence": ("block_low_confidence", ()),
    "block:low_confidence_static": ("block_static", ()),
    "block:low_confidence_dynamic": ("block_dynamic", ("block:threshold",)),
    "block:sequential": ("block_sequential", ()),
    "block:editing": ("block_editing", ("block:joint_threshold",)),
}
for _name, (_attr, _aliases) in _ENTRIES.items():
    decoders.register(_name, f"dare.backends.decoding.entries:{_attr}", aliases=_aliases)

_CACHES = {"prefix": "fastdllm:PREFIX", "dual": "fastdllm:DUAL", "dkv": "dkv_cache:DKV"}
for _name, _ref in _CACHES.items():
    caches.register(_name, f"dare.backends.decoding.{_ref}")


def strategies(family: str) -> list[str]:
    """Remasking names available for a decoding family."""
    return [n.split(":", 1)[1] for n in decoders.names() if n.startswith(family + ":")]
