"""Registers the built-in estimators and algorithms, lazily (``module:attr``): nothing heavy is imported
until a name is used. Also the target of the ``dare.plugins`` entry point for this package."""

from dare.harness.registry import algorithms, estimators

_EST = "dare.trainers.estimators"
_ALG = "dare.trainers.algorithms"

estimators.register("one_step", f"{_EST}.masked:OneStep")
estimators.register("coupled", f"{_EST}.masked:Coupled")
estimators.register("mc_elbo", f"{_EST}.elbo:MonteCarloELBO")
estimators.register("block_elbo", f"{_EST}.elbo:BlockELBO")
estimators.register("block_trajectory", f"{_EST}.trajectory:BlockTrajectory")
estimators.register("mdm_trajectory", f"{_EST}.trajectory:MaskedTrajectory")

algorithms.register("sft", f"{_ALG}.sft:SFT")
algorithms.register("d1", f"{_ALG}.d1:D1", aliases=("diffu_grpo",))
algorithms.register("coupled_grpo", f"{_ALG}.coupled_grpo:CoupledGRPO", aliases=("coupled-grpo",))
algorithms.register("dipo", f"{_ALG}.dipo:DiPO")
