"""Diffusion decoders and the KV caches of the cached engine.

Each strategy module declares its decoders (:func:`.spec.decoder`) and caches (:func:`.spec.kv_cache`), which
register in ``dare.harness.registry.decoders`` as ``<family>:<remasking>`` and in ``registry.caches`` as
``DecodingConfig.cache`` names. Importing this package only names them, each with the module that declares it,
so listing them imports no torch; the first lookup of a name imports its module (see :mod:`.spec`).
"""

from dare.harness.registry import caches, decoders

#: module -> the decoders it declares (aliases in brackets of the registrations in the module)
_DECODERS = {
    "llada": ("mdm:low_confidence", "mdm:random"),
    "pc_sampler": ("mdm:pc_sampler",),
    "klass": ("mdm:klass",),
    "dream_klass": ("dream:klass",),
    "dpad": ("mdm:dpad",),
    "dkv_greedy": ("mdm:dkv_greedy",),
    "remix": ("mdm:remix",),
    "info_gain": ("mdm:info_gain", "dream:info_gain"),
    "dinfer": ("mdm:dinfer_threshold", "mdm:dinfer_credit", "mdm:dinfer_hierarchy", "dream:dinfer_threshold",
               "dream:dinfer_credit", "dream:dinfer_hierarchy"),
    "d2cache": ("mdm:d2cache", "dream:d2cache"),
    "d3llm": ("mdm:d3llm", "dream:d3llm"),
    "lopa": ("dream:lopa",),
    "eb_sampler": ("mdm:eb_sampler", "dream:eb_sampler"),
    "dream": ("dream:origin", "dream:maskgit_plus", "dream:low_confidence", "dream:topk_margin", "dream:margin",
              "dream:entropy"),
    "block": ("block:low_confidence", "block:low_confidence_static", "block:low_confidence_dynamic",
              "block:threshold", "block:sequential", "block:editing", "block:joint_threshold"),
}
_CACHES = {"fastdllm": ("prefix", "dual"), "dkv_cache": ("dkv",)}

for _module, _names in _DECODERS.items():
    for _name in _names:
        decoders.register(_name, f"dare.backends.decoding.{_module}")
for _module, _names in _CACHES.items():
    for _name in _names:
        caches.register(_name, f"dare.backends.decoding.{_module}")


def strategies(family: str) -> list[str]:
    """Remasking names available for a decoding family."""
    return [n.split(":", 1)[1] for n in decoders.names() if n.startswith(family + ":")]
