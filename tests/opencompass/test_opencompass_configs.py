"""OpenCompass config files as users write them, read by the real ``opencompass`` CLI of this environment:
the builders imported inside ``read_base()`` next to stock datasets, every typo stopped while the config is
read (one line, nonzero exit, no task started), no ``benchmarks=`` needed, ``-r latest`` reusing a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opencompass")

from mmengine.config import Config  # noqa: E402

from dare.harness import config  # noqa: E402
from dare.harness.config import SHIPPED_CONFIGS  # noqa: E402
from dare.harness.data import load_samples  # noqa: E402
from dare.harness.verifiers import verifiers  # noqa: E402

OPENCOMPASS = Path(sys.executable).parent / "opencompass"  # the console script of this venv
HEAD = ("from mmengine.config import read_base\nwith read_base():\n"
        "    from dare.opencompass import dare_datasets, dare_model\n")
MIXED = SHIPPED_CONFIGS / "opencompass" / "eval_dare_mixed_tiny.py"


def opencompass(config: Path, work_dir: Path, *args: str, wrapped: bool = False, env: dict | None = None):
    command = [sys.executable, "-m", "dare.backends.opencompass"] if wrapped else [str(OPENCOMPASS)]
    return subprocess.run([*command, str(config), "-w", str(work_dir), *args], capture_output=True, text=True,
                          timeout=900, cwd=work_dir.parent, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def write_config(tmp_path: Path, body: str, name: str = "eval_user.py") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body)
    return path


@pytest.mark.parametrize("model, message", [
    ('dare_model("torch", "tiny-sdr")', "dare_model: unknown model 'tiny-sdr'; did you mean 'tiny-sdar'"),
    ('dare_model("torh", "tiny-llada")', "dare_model: unknown engine 'torh'; did you mean 'torch'?"),
    ('dare_model("torch", "tiny-llada", decoding=dict(stepz=4))',
     "dare_model: decoding field 'stepz' does not exist; did you mean 'steps'?"),
    ('dare_model("torch", "tiny-llada", decodng=dict(steps=4))',
     "dare_model: unexpected keyword decodng={'steps': 4}; did you mean 'decoding'?"),
    ('dare_model("torch", model_path="/no/such/checkpoint")',
     "dare_model: --model-path /no/such/checkpoint is not a directory"),
])
def test_a_typo_stops_plain_opencompass_with_one_line_while_reading_the_config(tmp_path, model, message):
    config_file = write_config(tmp_path, f'datasets = dare_datasets("countdown", limit=1)\nmodels = [{model}]\n')
    proc = opencompass(config_file, tmp_path / "outputs")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(message), proc.stderr[-500:]
    assert not (tmp_path / "outputs").exists(), "no task may start"


def test_the_wrapper_exits_2_on_a_typo_and_names_the_fix_for_a_top_level_import(tmp_path):
    config_file = write_config(tmp_path, 'datasets = dare_datasets("countdwn")\n'
                               'models = [dare_model("torch", "tiny-llada")]\n')
    proc = opencompass(config_file, tmp_path / "outputs", wrapped=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "dare_datasets: unknown suite 'countdwn'; did you mean 'countdown'" in proc.stderr.strip().splitlines()[-1]
    top_level = tmp_path / "eval_top.py"
    top_level.write_text("from dare.backends.opencompass.configs import dare_datasets, dare_model\n"
                         'datasets = dare_datasets("countdown", limit=1)\n'
                         'models = [dare_model("torch", "tiny-llada")]\n')
    proc = opencompass(top_level, tmp_path / "outputs", wrapped=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "`with read_base(): from dare.opencompass import dare_datasets, dare_model`")


def test_the_mixed_config_reads_dumps_and_reads_back(tmp_path):
    """What OpenCompass does before starting a task: read the config, dump it, read the dump."""
    cfg = Config.fromfile(str(MIXED), format_python_code=False)
    assert [d["abbr"] for d in cfg.datasets] == ["gsm8k", "dare-countdown"]
    assert cfg.datasets[0]["reader_cfg"]["test_range"] == "[0:4]"
    dumped = tmp_path / "dumped.py"
    cfg.dump(str(dumped))
    again = Config.fromfile(str(dumped), format_python_code=False)
    assert set(again.keys()) == {"datasets", "models", "gsm8k_datasets", "gsm8k_first"}, "the builders are not dumped"
    assert again.models[0]["type"] == "dare.backends.opencompass.model.DareModel"
    assert again.datasets[1]["infer_cfg"]["inferencer"] == {
        "type": "dare.backends.opencompass.inferencer.DareGenInferencer", "benchmark": "countdown"}


def gold_completions(path: Path, benchmark: str, n: int) -> list[str]:
    """k = 2 per sample: gold, then blank; sample 1 gets two blanks (a score strictly between 0 and 1)."""
    spec = config.benchmark(benchmark)
    verifier = verifiers.get(spec.verifier)(**spec.verifier_args)
    lines = []
    for i, sample in enumerate(load_samples(spec.data)[:n]):
        lines += [{"id": sample.id, "completion": "" if i == 1 else verifier.gold_completion(sample)},
                  {"id": sample.id, "completion": ""}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return [line["id"] for line in lines]


@pytest.mark.slow
def test_without_benchmarks_replay_finds_every_sample_and_reuse_latest_exits_0(tmp_path):
    """Replay serves completions by sample id: a prompt mapped to a wrong id fails the task. No ``benchmarks=``
    is given, so the ids can only come from the dataset's inferencer."""
    completions = tmp_path / "countdown.jsonl"
    gold_completions(completions, "countdown", 3)
    config_file = write_config(tmp_path, 'datasets = dare_datasets("countdown", limit=3)\n'
                               f'models = [dare_model("replay", "replayed", completions="{completions}", '
                               'decoding=dict(num_samples=2))]\n')
    proc = opencompass(config_file, tmp_path / "outputs")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run_dir] = (tmp_path / "outputs").iterdir()
    result = json.loads((run_dir / "results" / "dare-replay-replayed" / "dare-countdown.json").read_text())
    assert result["accuracy"] == pytest.approx(100 * 2 / 6)  # samples 0 and 2 gold once out of k = 2
    proc = opencompass(config_file, tmp_path / "outputs", "-r", "latest", wrapped=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| dare-countdown |" in proc.stdout and list((tmp_path / "outputs").iterdir()) == [run_dir]


@pytest.mark.slow
def test_the_mixed_config_runs_stock_and_dare_datasets_and_says_where_max_out_len_is_replaced(tmp_path):
    data = tmp_path / "data" / "gsm8k"
    data.mkdir(parents=True)
    rows = [{"question": s.prompt, "answer": f"#### {s.reference}"} for s in load_samples("gsm8k_test.jsonl")[:4]]
    for split in ("train", "test"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = opencompass(MIXED, tmp_path / "outputs", wrapped=True, env={"COMPASS_DATA_CACHE": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "note: dare-torch-tiny-llada decodes gen_length=32 tokens on gsm8k, not its max_out_len=512" in proc.stderr
    [run_dir] = (tmp_path / "outputs").iterdir()
    assert sorted(p.name for p in (run_dir / "results" / "dare-torch-tiny-llada").iterdir()) == [
        "dare-countdown.json", "gsm8k.json"]
    log = (run_dir / "logs" / "infer" / "dare-torch-tiny-llada" / "gsm8k.out").read_text()
    assert "the dataset asks for max_out_len=512; DARE decodes gen_length=32 tokens" in log


def test_the_inferencer_maps_prompts_to_sample_ids_without_benchmarks(tmp_path):
    """A sampled generation's seed is request_seed(seed, sample id, i): the id must be DARE's, not a prompt hash."""
    from dare.backends.opencompass.inferencer import DareGenInferencer
    from dare.backends.opencompass.model import DareModel
    from dare.harness.prompts import template

    completions = tmp_path / "countdown.jsonl"
    ids = gold_completions(completions, "countdown", 3)
    model = DareModel(engine="replay", model="replayed", completions=str(completions), decoding=dict(num_samples=2))
    spec = config.benchmark("countdown")
    samples = load_samples(spec.data)[:3]
    rendered = [template(spec.prompt).render(s) for s in samples]
    assert model.index.sample_id(rendered[2]).startswith("oc-"), "unknown before the inferencer names the benchmark"
    DareGenInferencer(model, max_out_len=32, benchmark="countdown", output_json_filepath=str(tmp_path))
    assert [model.index.sample_id(r) for r in rendered] == [s.id for s in samples] == ids[::2]
    assert model.engine.ctx.sample_ids >= set(ids), "replay knows every id of the benchmark"


def test_max_out_len_on_a_dare_model_points_at_gen_length():
    from dare.backends.opencompass.configs import dare_model
    from dare.backends.opencompass.validate import ConfigTimeError

    with pytest.raises(ConfigTimeError,
                       match=r"max_out_len is DARE's decoding.gen_length; pass decoding=dict\(gen_length=N\)"):
        dare_model("torch", "tiny-llada", max_out_len=512)
    config_cfg = dare_model("torch", "tiny-llada", decoding=dict(gen_length=64))
    assert config_cfg["max_out_len"] == 64 and config_cfg["decoding"] == {"gen_length": 64}
