"""dLLM architectures in plain PyTorch (LLaDA dense/MoE, MMaDA, Dream, SDAR dense/MoE, LLaDA2.x MoE).

Importing this package registers every architecture lazily in ``dare.harness.registry.architectures``
under its short name and the names its config.json uses, so detection is a registry lookup.
"""

from dare.harness.registry import architectures

_MODULE = "dare.backends.models.architectures"
_ENTRIES = {
    "llada": ("LLADA", ("LLaDAModelLM",)),
    "llada_moe": ("LLADA_MOE", ("LLaDAMoEModelLM", "lladamoe")),
    "mmada": ("MMADA", ("MMadaModelLM",)),
    "dream": ("DREAM", ("DreamModel", "Dream")),
    "sdar": ("SDAR", ("SDARForCausalLM",)),
    "sdar_moe": ("SDAR_MOE", ("SDARMoeForCausalLM",)),
    "llada2_moe": ("LLADA2_MOE", ("LLaDA2MoeModelLM",)),
}
for _name, (_attr, _aliases) in _ENTRIES.items():
    architectures.register(_name, f"{_MODULE}:{_attr}", aliases=_aliases)
