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
# preference optimisation (DPO, VRPO) and VRPO's stratified ELBO
estimators.register("stratified_elbo", f"{_EST}.stratified:StratifiedELBO")
estimators.register("block_stratified_elbo", f"{_EST}.stratified:BlockStratifiedELBO")
algorithms.register("dpo", f"{_ALG}.preference:DPO")
algorithms.register("vrpo", f"{_ALG}.preference:VRPO")
# MDPO (intermediate-state predictions) and CJ-GRPO (trajectory replay with EOSER / ascending steps)
estimators.register("step_prediction", f"{_EST}.step_prediction:StepPrediction")
algorithms.register("mdpo", f"{_ALG}.mdpo:MDPO")
algorithms.register("cj_grpo", f"{_ALG}.cj_grpo:CJGRPO", aliases=("cj-grpo",))
# SPG's sandwiched bounds, EBPO's composite block ELBO; SPG, BGPO (on stratified_elbo) and EBPO
estimators.register("sandwich", f"{_EST}.sandwich:Sandwich")
estimators.register("block_composite_elbo", f"{_EST}.composite:BlockCompositeELBO")
algorithms.register("spg", f"{_ALG}.spg:SPG")
algorithms.register("bgpo", f"{_ALG}.bgpo:BGPO")
algorithms.register("ebpo", f"{_ALG}.ebpo:EBPO")
# JustGRPO: the exact left-to-right likelihood of a masked diffusion model
estimators.register("autoregressive", f"{_EST}.trajectory:Autoregressive")
algorithms.register("just_grpo", f"{_ALG}.just_grpo:JustGRPO", aliases=("justgrpo",))
# ESPO: sequence ELBO with complementary corruptions, sequence-level clipped PPO
estimators.register("espo_elbo", f"{_EST}.espo:ESPOELBO")
algorithms.register("espo", f"{_ALG}.espo:ESPO")
