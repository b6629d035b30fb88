"""Dream's official ``diffusion_generate`` beside ``dream:<alg>`` on a full-vocabulary tiny Dream, one run.

    python benchmarks/dream_reference.py --reference PATH/generation_utils.py [--alg entropy]
        [--gen-length 32] [--steps 32] [--samples 4] [--threads 1]

``--reference`` is the official Dream generation code, read from a checkout (never copied here):
``generation_utils.py`` of the Hugging Face repository Dream-org/Dream-v0-Instruct-7B, or the copy NVlabs/Fast-dLLM
vendors as dream/model/generation_utils.py (its ``_sample`` keeps Dream's algorithms and adds
``confidence_threshold``). Its mixin drives our network (the same weights; a tiny hub-layout checkpoint with
Dream's 152,064-row vocabulary, hidden 64) through ``self(x, attention_mask, tok_idx).logits``. Prompts are
Sudoku prompts of equal length (no padding: the reference then attends fully, and its batch-averaged
mask count equals every row's own). One JSON line: seconds of each (best of two), speed ratio, whether the
tokens are identical and how many differ.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
import types
from pathlib import Path

import torch

from dare.backends.decoding.common import Canvas
from dare.backends.engines.torch import TorchEngine
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness import config, prompts
from dare.harness.data import load_samples
from dare.harness.engine import EngineContext
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders


def _reference_mixin(path: Path):
    spec = importlib.util.spec_from_file_location("dream_reference_generation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.DreamGenerationConfig.validate = lambda self, *a, **k: None  # a no-op upstream; newer transformers pass more
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, type=Path)
    parser.add_argument("--alg", default="entropy", choices=["entropy", "maskgit_plus", "topk_margin"])
    parser.add_argument("--gen-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ref = _reference_mixin(args.reference)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_tiny_checkpoint("dream", Path(tmp) / "dream", config_overrides={"vocab_size": 152064})
        engine = TorchEngine(EngineContext(model_name="hub-dream", model_path=path, device="cpu"))
        model = engine.model
        bench = config.benchmark("sudoku")
        template = prompts.template(bench.prompt)
        ids = [engine.prompt_ids(template.render(s)) for s in load_samples(bench.data)[:args.samples]]
        if len({len(i) for i in ids}) != 1:
            raise SystemExit("the prompts differ in length; pick --samples so that they do not")

        class Reference(ref.DreamGenerationMixin):
            device = torch.device("cpu")
            generation_config = ref.DreamGenerationConfig(mask_token_id=model.mask_id, eos_token_id=model.eos_id,
                                                          pad_token_id=model.pad_id, bos_token_id=model.eos_id)

            def __call__(self, x, attention_mask, tok_idx):
                positions = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)
                return types.SimpleNamespace(logits=model.net(x, positions, None))

        official = Reference()
        cfg = DecodingConfig(gen_length=args.gen_length, steps=args.steps, block_length=args.gen_length,
                             remasking=args.alg)
        decode = decoders.get(f"dream:{args.alg}")
        prompt = torch.tensor(ids)
        seconds = {"official": [], "ours": []}
        for _ in range(2):
            start = time.perf_counter()
            with torch.inference_mode():
                theirs = official.diffusion_generate(
                    prompt, generation_config=official.generation_config, max_new_tokens=args.gen_length,
                    steps=args.steps, temperature=0.0, alg=args.alg, alg_temp=0.0, output_history=False,
                    return_dict_in_generate=True).sequences[:, prompt.shape[1]:]
            seconds["official"].append(time.perf_counter() - start)
            canvas = Canvas.build(ids, args.gen_length, model.mask_id, model.pad_id, "cpu")
            start = time.perf_counter()
            with torch.inference_mode():
                ours = decode(model, canvas, cfg, [torch.Generator() for _ in ids]).tokens
            seconds["ours"].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in seconds.items()}
    print(json.dumps({"alg": args.alg, "gen_length": args.gen_length, "steps": args.steps, "batch": len(ids),
                      "vocab": 152064, "threads": args.threads, "reference": str(args.reference),
                      "official_s": round(best["official"], 3), "ours_s": round(best["ours"], 3),
                      "speed_ratio": round(best["official"] / best["ours"], 2),
                      "tokens_identical": bool(torch.equal(theirs, ours)),
                      "differing_tokens": int((theirs != ours).sum())}))


if __name__ == "__main__":
    main()
