"""Each loss at ratio != 1 on a context-dependent policy, against the official formula written out here.

The policy is :class:`~.toy.JointPolicy`: every query gets the exact conditional of one joint distribution
given the response tokens it can see, so which tokens a corruption hides changes every value (scoring a
token from the wrong copy, or masking the same tokens twice, gives other numbers). Old log-probs are the
hand-computed values shifted by per-token offsets, so ratios fall inside and outside the clip range; the
expected loss is built from the hand-computed conditionals and the official code's formula (file and
function cited at each test), never from the estimator under test.
"""

from __future__ import annotations

import math

import pytest
import torch

from dare.trainers import build_algorithm
from dare.trainers.algorithms.dipo import commit_rounds

from .toy import JointPolicy

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

RESPONSES = [[2, 0, 1, 2], [1, 1, 0, 2], [0, 2, 2, 1], [2, 2, 0, 0]]
OFFSETS = torch.tensor([[0.3, -0.9, 0.05, 0.7], [-0.4, 1.4, -0.1, 0.2], [0.6, -0.3, -0.8, 0.1],
                        [-0.05, 0.4, 0.9, -0.7]], dtype=torch.float64)  # log(old ratio) per token


def cond(policy: JointPolicy, y: list[int], i: int, visible) -> float:
    """log p(y_i | y_j for j in ``visible``) under the joint: brute force over all V^n sequences."""
    ok = torch.ones(len(policy.seqs), dtype=torch.bool)
    for j in visible:
        ok &= policy.seqs[:, j] == y[j]
    hit = ok & (policy.seqs[:, i] == y[i])
    return math.log(float(policy.joint[hit].sum()) / float(policy.joint[ok].sum()))


def joint_batch(policy: JointPolicy, rewards: list[float], groups: list[int]):
    from dare.trainers.batch import RolloutBatch

    rows, t = len(RESPONSES), len(RESPONSES[0])
    return RolloutBatch(
        prompt_ids=torch.zeros(rows, policy.prompt_len, dtype=torch.long),
        prompt_mask=torch.ones(rows, policy.prompt_len, dtype=torch.bool),
        completion_ids=torch.tensor(RESPONSES), completion_mask=torch.ones(rows, t, dtype=torch.bool),
        completion_attn=torch.ones(rows, t, dtype=torch.bool), group_ids=torch.tensor(groups),
        rewards=torch.tensor(rewards))


def ppo(ratio: torch.Tensor, adv: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """-min(r A, clip(r, 1 - lo, 1 + hi) A): the loss of d1, DiffuCoder, DiRL, MDPO, ESPO and JustGRPO."""
    return -torch.minimum(ratio * adv, ratio.clamp(1 - lo, 1 + hi) * adv)


def k3(lp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """exp(ref - lp) - (ref - lp) - 1 (d1 diffu_grpo_trainer.py compute_loss; DiffuCoder coupled_grpo.py)."""
    return torch.exp(ref - lp) - (ref - lp) - 1


def _run(algo, policy, batch, hand: torch.Tensor, ref_shift: float = 0.0):
    """Loss of ``algo`` with old = hand - OFFSETS (and ref = hand + ref_shift), at inner step 0."""
    algo.bind(policy.attention)
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(5))
    batch.old_logp = (hand - OFFSETS)[None].float()
    batch.ref_logp = (hand + ref_shift)[None].float()
    batch.advantages = algo.advantages(batch)
    return float(algo.loss(policy, batch, 0).loss.detach())


def test_d1_loss_is_the_diffu_grpo_formula():
    """dllm-reasoning/d1 diffu-grpo/diffu_grpo_trainer.py compute_loss: coef_1 = exp(lp - old), coef_2 =
    clamp(coef_1, 1 - eps, 1 + eps), loss = sum((-min(coef_1 A, coef_2 A) + beta k3) mask) / sum(mask),
    A = r - mean; the response fully masked, so lp_i = log p(y_i) (the prompt does not enter the joint)."""
    policy = JointPolicy(n=4, vocab=3, seed=2)
    batch = joint_batch(policy, [1.0, 0.0, 0.5, 0.0], [0, 0, 0, 0])
    batch.completion_mask[3, 2:] = False  # the tail after EOS is not scored
    hand = torch.tensor([[cond(policy, y, i, []) for i in range(4)] for y in RESPONSES], dtype=torch.float64)
    algo = build_algorithm("d1", {"inner_steps": 1, "resample_noise": False})
    got = _run(algo, policy, batch, hand, ref_shift=0.3)
    adv = torch.tensor([1.0, 0.0, 0.5, 0.0], dtype=torch.float64) - 0.375
    per_token = ppo(torch.exp(OFFSETS), adv[:, None], 0.5, 0.5) + 0.04 * k3(hand, hand + 0.3)
    mask = batch.completion_mask.double()
    assert got == pytest.approx(float((per_token * mask).sum() / mask.sum()), rel=1e-5)


def test_coupled_grpo_loss_is_diffucoder_with_each_token_scored_from_the_copy_that_masks_it():
    """apple/ml-diffucoder src/open_r1/coupled_grpo.py: forward_process builds z0 (all masked), z1 (u < t
    masked) and z2 (u > t masked) with one t per call; selective_log_softmax gives
    (lp0 + where(mask1, lp1 / t, lp2 / (1 - t))) / 2; compute_loss is d1's formula with eps 0.5, beta 0.01
    and a leave-one-out advantage."""
    policy = JointPolicy(n=4, vocab=3, seed=3)
    batch = joint_batch(policy, [1.0, 0.0, 0.0, 1.0], [0, 0, 0, 0])
    algo = build_algorithm("coupled_grpo", {"inner_steps": 1, "resample_noise": False})
    algo.bind(policy.attention)
    noise = algo.estimator.draw(batch, torch.Generator().manual_seed(5))
    t = float(noise["t"][0])
    assert torch.all(noise["t"] == t) and 0.2 <= t <= 0.8  # one mask ratio per call
    first = noise["first"]
    hand = torch.zeros(4, 4, dtype=torch.float64)
    for b, y in enumerate(RESPONSES):
        in1 = [j for j in range(4) if first[b, j]]
        out1 = [j for j in range(4) if not first[b, j]]
        for i in range(4):  # z1 hides in1 and shows out1; z2 the reverse
            pair = cond(policy, y, i, out1) / t if first[b, i] else cond(policy, y, i, in1) / (1 - t)
            hand[b, i] = 0.5 * (cond(policy, y, i, []) + pair)
    got = _run(algo, policy, batch, hand, ref_shift=-0.2)
    adv = torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3], dtype=torch.float64)  # r_j - mean_{k != j} r_k
    per_token = ppo(torch.exp(OFFSETS), adv[:, None], 0.5, 0.5) + 0.01 * k3(hand, hand - 0.2)
    assert got == pytest.approx(float(per_token.mean()), rel=1e-5)


def test_dipo_loss_is_dirl_per_response_and_round_with_the_higher_upper_clip():
    """OpenMOSS/DiRL models/sdar/modeling_sdar.py (RL loss): ratio = exp(clamp(lp - old, -10, 10)), clipped
    to [1 - eps, 1 + eps + 0.08], loss = -mean(min(r A, clip(r) A)) per training sample, + beta k3 mean;
    train/grpo.py: one sample per (response, round), round k = the tokens committed at the k-th step of
    each block (generate_training_samples_for_one), the gradient divided by responses x block size;
    train/rollout_dapo_server.py z_score_normalize: population std, no eps."""
    policy = JointPolicy(n=4, vocab=3, prompt_len=1, block_size=2, seed=4)
    batch = joint_batch(policy, [1.0, 0.0, 0.0, 0.0], [0, 0, 1, 1])
    batch.rewards = torch.tensor([1.0, 0.0, 0.25, 1.0])
    # positions: prompt 0, slots 1..4 -> blocks (K = 2) of the slots: 0, 1, 1, 2
    batch.commit_step = torch.tensor([[0, 1, 2, 3], [0, 2, 2, 3], [1, 3, 4, 5], [0, 1, 1, 2]])
    rounds = commit_rounds(batch.commit_step, torch.arange(1, 5).expand(4, -1), batch.completion_mask, 2)
    assert rounds.tolist() == [[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
    hand = torch.tensor([[cond(policy, y, i, []) for i in range(4)] for y in RESPONSES], dtype=torch.float64)
    algo = build_algorithm("dipo", {"estimator": "one_step", "estimator_args": {"prompt_mask_prob": 0.0},
                                    "inner_steps": 1})
    got = _run(algo, policy, batch, hand, ref_shift=0.25)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)  # (r - mean) / population std
    per_token = ppo(torch.exp(OFFSETS), adv[:, None], 0.2, 0.28) + 0.1 * k3(hand, hand + 0.25)
    total = 0.0
    for b in range(4):
        for k in range(4):
            cell = rounds[b] == k
            if cell.any():
                total += float(per_token[b][cell].mean())
    assert got == pytest.approx(total / (4 * 2), rel=1e-5)
    token = build_algorithm("dipo", {"estimator": "one_step", "reduction": "token", "inner_steps": 1,
                                     "estimator_args": {"prompt_mask_prob": 0.0}})
    assert _run(token, policy, batch, hand, ref_shift=0.25) != pytest.approx(got, rel=1e-3)


def test_just_grpo_loss_sums_tokens_over_gen_length_times_samples_with_signal():
    """LeapLabTHU/JustGRPO grpo.py: logprob_loss scores every gen_length position t on [prompt, y_<t, masks]
    with logits / temperature (1.0), loss -min(r A, clip(r, 1 +- 0.2) A) summed and scaled by
    1 / gen_length / valid_samples (samples with A != 0, train.py); compute_group_advantages:
    (r - mean) / (std + 1e-4), unbiased std."""
    policy = JointPolicy(n=4, vocab=3, seed=6)
    batch = joint_batch(policy, [1.0, 0.0, 0.5, 0.5], [0, 0, 1, 1])
    batch.completion_mask[1, 3] = False  # ignored: JustGRPO scores all positions (count_padding)
    hand = torch.tensor([[cond(policy, y, i, list(range(i))) for i in range(4)] for y in RESPONSES],
                        dtype=torch.float64)
    algo = build_algorithm("just_grpo", {"count_padding": True})
    got = _run(algo, policy, batch, hand)
    s = math.sqrt(0.5)
    adv = torch.tensor([0.5 / (s + 1e-4), -0.5 / (s + 1e-4), 0.0, 0.0], dtype=torch.float64)
    per_token = ppo(torch.exp(OFFSETS), adv[:, None], 0.2, 0.2)
    expected = float((per_token * batch.completion_mask).sum()) / (4 * 2)  # gen_length 4, 2 valid samples
    assert got == pytest.approx(expected, rel=1e-5)


def test_espo_loss_is_the_sequence_ratio_of_elbos_over_l_with_k2_on_raw_elbos():
    """ML-GSAI/ESPO espo/espo_trainer.py: _get_elbo masks x of the L completion tokens (the whole completion),
    loss CE / p with p = x / (L + 1) and, with reduce_var, CE / (L / (L + 1) - p) on the complementary
    corruption, halved; the ELBO is minus their sum, averaged over num_mc draws; compute_loss: coef =
    exp((E - E_old) / L), loss = -sum(min(coef A, clip(coef) A)) / B + beta sum((E - E_ref)^2 / 2) / (B L)."""
    policy = JointPolicy(n=4, vocab=3, seed=7)
    batch = joint_batch(policy, [1.0, 0.0, 1.0, 1.0], [0, 0, 0, 0])
    algo = build_algorithm("espo", {"inner_steps": 1, "resample_noise": False, "beta": 0.05})
    algo.bind(policy.attention)
    noise = algo.estimator.draw(batch, torch.Generator().manual_seed(5))
    big_l = 4
    elbo = torch.zeros(4, dtype=torch.float64)
    for b, y in enumerate(RESPONSES):
        for j in range(2):
            masked = [i for i in range(4) if noise["masked"][b, j, i]]
            shown = [i for i in range(4) if i not in masked]
            x = len(masked)
            half1 = sum(cond(policy, y, i, shown) for i in masked) * (big_l + 1) / x if x else 0.0
            half2 = sum(cond(policy, y, i, masked) for i in shown) * (big_l + 1) / (big_l - x) if x < big_l else 0.0
            elbo[b] += (half1 + half2) / 2 / 2
    delta = torch.tensor([0.5, -0.05, 0.1, -0.4], dtype=torch.float64)  # per-token log rho, in and out of clip
    batch.noise = [noise]
    batch.old_logp = ((elbo - big_l * delta) / big_l)[:, None].expand(4, 4)[None].float()
    batch.ref_logp = ((elbo + 2.0) / big_l)[:, None].expand(4, 4)[None].float()
    batch.advantages = algo.advantages(batch)
    got = float(algo.loss(policy, batch, 0).loss.detach())
    adv = torch.tensor([1 / 3, -1.0, 1 / 3, 1 / 3], dtype=torch.float64)  # RLOO; the advantages do not sum to 0
    expected = float(ppo(torch.exp(delta), adv, 0.2, 0.2).sum() / 4 + 0.05 * (4 * 2.0 ** 2 / 2) / (4 * big_l))
    assert got == pytest.approx(expected, rel=1e-4)


def test_mdpo_loss_outside_the_clip_range():
    """autonomousvision/mdpo src/open_r1/mdpo/mdpo_trainer.py compute_loss: -min(coef_1 A, clamp(coef_1, 1 +-
    eps) A) * lambda_t, lambda_t = L / (m_t + 1e-4), times mask and confidence, / (m_t + 1e-4) per (row, step)
    micro-batch; log-probs from logits / (T + eps) (_get_per_token_logps)."""
    from .test_mdpo import _loss_batch

    conf = [[[0.5, 0.2, 0.9], [1.0, 1.0, 0.3]]]
    policy, batch = _loss_batch(conf, [[1.0, -2.0]], [[0, 2]])
    algo = build_algorithm("mdpo", {"temperature": 0.5})
    algo.bind("bidirectional")
    with torch.no_grad():
        logp = (policy.logits / 0.5).log_softmax(-1)  # T = 0.5 on the context-free logits
    hand = logp[torch.arange(3), torch.tensor([0, 1, 2])].double()
    est = algo.estimator.estimate(policy, batch, batch.noise[0]).token_logp.detach().double()
    assert torch.allclose(est[0, 0], hand, atol=1e-12)
    offsets = torch.tensor([[0.5, -0.5, 0.3], [0.2, 0.2, -0.6]], dtype=torch.float64)
    batch.old_logp = (hand[None, None] - offsets[None])[None]
    got = float(algo.loss(policy, batch, 0).loss.detach())
    r = torch.exp(offsets)
    c = torch.tensor(conf[0], dtype=torch.float64)
    step0 = (ppo(r[0], torch.tensor(1.0, dtype=torch.float64), 0.2, 0.2) * 3 / 3.0001 * c[0]).sum() / 3.0001
    step2 = ppo(r[1, 2], torch.tensor(-2.0, dtype=torch.float64), 0.2, 0.2) * 3 / 1.0001 * c[1, 2] / 1.0001
    assert got == pytest.approx(float((step0 + step2) / 2), rel=1e-6)


def test_spg_negative_rows_use_mix_weight_times_eubo_plus_the_rest_elbo():
    """facebookresearch/SPG: logp_estimation 'mix' = omega * EUBO + (1 - omega) * ELBO for A <= 0 rows; with
    omega 0.3 the two weights are not interchangeable."""
    policy = JointPolicy(n=4, vocab=3, seed=8)
    batch = joint_batch(policy, [1.0, 0.0, 0.0, 0.5], [0, 0, 0, 0])
    algo = build_algorithm("spg", {"mix_weight": 0.3, "inner_steps": 1, "resample_noise": False})
    algo.bind(policy.attention)
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    batch.advantages = algo.advantages(batch)
    lower, upper, _ = algo.estimator.bounds(policy, batch, batch.noise[0], 1.5)
    assert not torch.allclose(lower, upper)
    adv = batch.advantages.double()[:, None]
    chosen = torch.where(adv > 0, lower.double(), 0.3 * upper.double() + 0.7 * lower.double())
    expected = float((-adv * chosen).sum() / 16)
    assert float(algo.loss(policy, batch, 0).loss.detach()) == pytest.approx(expected, rel=1e-6)


def test_bgpo_loss_is_the_per_sample_bound_with_dual_clip_length_weighted():
    """BGPO as run in yjyddq/DARE (llada_dp_actor_bgpo.py on dllm_core_algos.compute_policy_loss): per Monte-
    Carlo sample j, l_j = ELBO_j / L, d = l_j - l_j_old, r = 1 + d where A > 0 and exp(d) elsewhere, the
    dual-clip PPO loss (eps 0.2, c 3), a length-weighted mean over rows and the mean over the n samples."""
    policy = JointPolicy(n=4, vocab=3, seed=9)
    batch = joint_batch(policy, [1.0, 0.0, 1.0, 0.0], [0, 0, 1, 1])
    batch.completion_mask[1, 3] = False
    algo = build_algorithm("bgpo", {"estimator_args": {"samples": 2}})
    algo.bind(policy.attention)
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(2))
    assert len(batch.noise) == 2
    with torch.no_grad():
        est = torch.stack([algo.estimator.estimate(policy, batch, n).token_logp for n in batch.noise]).double()
    delta = torch.tensor([[0.5, 1.5, 0.1, -0.5], [-0.1, -0.4, 0.3, 0.05]], dtype=torch.float64)  # (n, B)
    lengths = batch.completion_mask.sum(1).double()
    per_token = delta * 4 / lengths  # so that sum over counted tokens / L (= 4) is delta
    batch.old_logp = (est - per_token[..., None] * batch.completion_mask).float()
    batch.advantages = algo.advantages(batch)
    got = float(sum(t.loss for t in algo.loss_terms(policy, batch, 0)).detach())
    adv = batch.advantages.double()
    s = math.sqrt(0.5)
    assert torch.allclose(adv, torch.tensor([0.5, -0.5, 0.5, -0.5], dtype=torch.float64) / (s + 1e-6))
    ratio = torch.where(adv > 0, 1 + delta, torch.exp(delta))
    loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    loss = torch.where(adv < 0, torch.minimum(loss, -adv * 3.0), loss)  # the dual clip: delta 1.5 -> 4.48 > 3
    expected = float((loss * lengths).sum() / (2 * lengths.sum()))
    assert got == pytest.approx(expected, rel=1e-5)


def test_trace_rl_loss_is_dllm_rl_per_sample_sum_over_l1_with_k3_against_the_behaviour_policy():
    """Gen-Verse/dLLM-RL train/rl_sdar.py forward_process (method TraceRL): per (response, round) sample,
    ratio = exp(clamp(lp - old, -10, 10)), surrogate min(r A, clip(r, 1 +- 0.2) A) summed over the round's
    tokens / L1, KL k3 of (lp - old) summed / L1 times beta 0.01, the samples averaged; reward/rl_reward.py
    z_score_normalize: population std (0 for equal rewards)."""
    policy = JointPolicy(n=4, vocab=3, prompt_len=1, block_size=2, seed=4)
    batch = joint_batch(policy, [1.0, 0.0, 0.25, 1.0], [0, 0, 1, 1])
    batch.commit_step = torch.tensor([[0, 1, 2, 3], [0, 2, 2, 3], [1, 3, 4, 5], [0, 1, 1, 2]])
    rounds = torch.tensor([[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]])  # as in the DiPO test
    hand = torch.tensor([[cond(policy, y, i, []) for i in range(4)] for y in RESPONSES], dtype=torch.float64)
    algo = build_algorithm("trace_rl", {"estimator": "one_step", "estimator_args": {"prompt_mask_prob": 0.0}})
    assert not algo.requirements().reference  # the KL is against the behaviour policy
    got = _run(algo, policy, batch, hand, ref_shift=5.0)  # a reference far away must not matter
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    d = OFFSETS  # lp - old
    per_token = ppo(torch.exp(d), adv[:, None], 0.2, 0.2) + 0.01 * (torch.exp(-d) - 1 + d)
    samples = [float(per_token[b][rounds[b] == k].sum()) / 4 for b in range(4) for k in range(2)
               if (rounds[b] == k).any()]
    assert got == pytest.approx(sum(samples) / len(samples), rel=1e-5)
