"""Scoring estimators of ``log p(continuation | context)``, as each family's authors compute them.

Each module declares its estimators (:func:`.base.scoring_estimator`), which register in
``dare.harness.registry.likelihoods``; importing this package only names them with the module that declares
them, so listing them imports no torch. :data:`DEFAULTS` is each decoding family's estimator when a run names
none. The torch engines serve them through :class:`.engine.LikelihoodMixin`.
"""

from dare.harness.registry import likelihoods

#: module -> the estimators it declares
_ESTIMATORS = {"masked": ("llada_mc",), "dream": ("dream_mc", "dream_ar"), "block": ("block_elbo",)}
#: decoding family (Architecture.decoding_family) -> its authors' estimator
DEFAULTS = {"mdm": "llada_mc", "dream": "dream_mc", "block": "block_elbo"}

for _module, _names in _ESTIMATORS.items():
    for _name in _names:
        likelihoods.register(_name, f"dare.backends.likelihood.{_module}")
