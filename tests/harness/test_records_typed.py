"""The typed facts of a run record (model.training, timing, environment) read the run.json files the code
before them wrote, and write the same JSON.

``fixtures/records_v2`` holds schema-2 records written by that code: a dare-eval run of the shipped
tiny-sdar, a replay run, and the evaluations dare-train wrote after an sft and a d1 run (samples trimmed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from dare.harness import cli
from dare.harness.records import (
    SCHEMA_VERSION,
    BenchmarkTiming,
    CurvePoint,
    Environment,
    RunRecord,
    Timing,
    TrainingLink,
    json_text,
)
from dare.leaderboards.curves import load_curve
from dare.leaderboards.loading import load_runs

FIXTURES = Path(__file__).parent / "fixtures"
OLD = sorted((FIXTURES / "records_v2").glob("*/run.json"))
# environment keys that depend on the machine or checkout, not on the code that writes them
MACHINE_DEPENDENT = {"cuda", "gpu", "mkl_cbwr", "git_commit", "git_dirty"}


def _written(record: RunRecord) -> str:
    """run.json's text as harness/rundir.write_run writes it."""
    return json_text(record.to_json(), indent=2) + "\n"


def test_the_fixtures_are_the_current_schema():
    assert SCHEMA_VERSION == 2 and len(OLD) == 4
    assert all(json.loads(path.read_text())["schema_version"] == 2 for path in OLD)


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.parent.name)
def test_old_records_load_typed_and_write_back_byte_for_byte(path):
    text = path.read_text()
    record = RunRecord.model_validate(json.loads(text))
    assert isinstance(record.timing, Timing) and isinstance(record.environment, Environment)
    assert record.environment.python == "3.11.7" and record.environment.torch_threads >= 1
    assert record.environment.git_dirty is False and len(record.environment.git_commit) == 40
    sudoku = record.timing.benchmark("sudoku")
    assert sudoku.generate_s > 0 and sudoku.verify_s > 0 and record.timing.total_s >= sudoku.generate_s
    assert record.timing.benchmark("gsm8k") == BenchmarkTiming()  # none recorded
    assert _written(record) == text  # same keys, values and order: old tools read new records unchanged


def test_old_training_links_are_typed():
    d1 = RunRecord.model_validate_json((FIXTURES / "records_v2" / "train-d1" / "run.json").read_text())
    training = d1.model.training
    assert isinstance(training, TrainingLink) and training.algorithm == "d1" and training.step == 2
    assert training.run == training.run_name() == "d1-sudoku-tiny-sdar-s0" and training.base_model == "tiny-sdar"
    assert training.config["algorithm"] == "d1" and training.algorithm_config["estimator"] == "one_step"
    assert [p.step for p in training.curve] == [1, 2] and all(isinstance(p, CurvePoint) for p in training.curve)
    assert training.curve[0].reward is not None
    sft = RunRecord.model_validate_json((FIXTURES / "records_v2" / "train-sft" / "run.json").read_text())
    assert sft.model.training.algorithm == "sft"
    assert sft.model.training.curve[0].reward is None  # not recorded: absent from the JSON, not null
    assert set(sft.to_json()["model"]["training"]["curve"][0]) == {"step", "loss"}
    replay = RunRecord.model_validate_json((FIXTURES / "records_v2" / "replay" / "run.json").read_text())
    assert replay.model.training is None and replay.to_json()["model"]["training"] is None


def test_the_leaderboard_loads_old_records_and_draws_their_curves():
    loaded = load_runs([FIXTURES / "records_v2"])
    assert not loaded.skipped and len(loaded.runs) == 4
    d1 = next(r for r in loaded.runs if r.directory.name == "train-d1")
    assert [row["step"] for row in load_curve(d1.record.model.training, d1.directory)] == [1, 2]


def test_schema_1_records_still_load():
    record = RunRecord.model_validate_json((FIXTURES / "run_schema1_replay_gsm8k.json").read_text())
    assert record.timing.benchmark("gsm8k").verify_s == 5.589 and record.timing.total_s == 5.651
    assert record.environment.model_dump() == {"python": "3.11.7", "torch": "2.13.0+cpu"}  # trimmed: no more


def test_a_fresh_record_has_the_keys_the_old_code_wrote(capsys, tmp_path):
    code = cli.main(["--no-progress", "--model", "tiny-sdar", "--suite", "sudoku", "--limit", "1",
                     "--out", str(tmp_path), "--set", "engine.threads=1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    fresh = json.loads((Path(out.out.strip().splitlines()[-1]) / "run.json").read_text())
    old = json.loads((FIXTURES / "records_v2" / "eval-tiny-sdar" / "run.json").read_text())
    assert list(fresh) == list(old)
    assert list(fresh["timing"]) == list(old["timing"]) == ["sudoku.generate_s", "sudoku.verify_s", "total_s"]
    assert [k for k in fresh["environment"] if k not in MACHINE_DEPENDENT] == \
        [k for k in old["environment"] if k not in MACHINE_DEPENDENT]
    assert list(fresh["model"]) == list(old["model"]) and fresh["model"]["training"] is None
    assert RunRecord.model_validate(fresh).environment.python == fresh["environment"]["python"]


def test_the_training_link_serialises_as_dare_train_wrote_it():
    from dare.trainers.training.evaluate import curve

    old = json.loads((FIXTURES / "records_v2" / "train-d1" / "run.json").read_text())["model"]["training"]
    link = TrainingLink(**{**old, "curve": curve([{"step": 1, "reward": 0.5, "loss": 0.25, "lr": 0.01}])})
    dumped = link.model_dump(mode="json")
    assert list(dumped) == list(old)  # the keys trainers/evaluate.py wrote, in its order
    assert dumped["curve"] == [{"step": 1, "reward": 0.5, "loss": 0.25}]  # only what the log row had


def test_timing_reads_and_writes_the_flat_form():
    flat = {"a.generate_s": 1.0, "b.generate_s": 2.0, "a.verify_s": 3.0, "b.verify_s": 4.0, "total_s": 10.0}
    timing = Timing.model_validate(flat)
    assert timing.benchmark("b") == BenchmarkTiming(generate_s=2.0, verify_s=4.0)
    assert json.dumps(timing.model_dump()) == json.dumps(flat)  # order included
    assert Timing.model_validate(timing.model_dump()) == timing
    # an interrupted run: verified but never finished generating; a dotted benchmark name
    partial = Timing.model_validate({"math.500.verify_s": 0.5, "total_s": 1.0})
    assert partial.benchmark("math.500") == BenchmarkTiming(verify_s=0.5)
    assert partial.model_dump() == {"math.500.verify_s": 0.5, "total_s": 1.0}
    assert Timing().model_dump() == {}


def test_environment_keeps_absent_apart_from_null():
    env = Environment(python="3.11.7", dare_version=None)
    assert env.model_dump() == {"python": "3.11.7", "dare_version": None} and env.cpu is None
    from dare.harness.rundir import environment, environment_info

    typed = environment()
    assert environment_info() == typed.model_dump(mode="json")
    assert typed.python and typed.cpu_count and "python" in environment_info()


def test_a_commit_or_an_edit_during_the_run_marks_its_records_dirty(monkeypatch):
    """A run imports its code when it starts; a training evaluates at its end. The records name the tree the
    process's first record found, and are dirty when HEAD or the tracked files changed since."""
    from dare.harness import rundir

    tree = {"rev-parse": "a" * 40, "status": ""}
    monkeypatch.setattr(rundir, "_git", lambda command, *args: tree[command])
    monkeypatch.setattr(rundir, "_SOURCE_AT_FIRST_RECORD", [])  # a fresh process
    first = rundir.environment()
    assert (first.git_commit, first.git_dirty) == ("a" * 40, False)
    assert rundir.environment().git_dirty is False  # nothing changed
    tree["rev-parse"] = "b" * 40  # committed meanwhile
    later = rundir.environment()
    assert (later.git_commit, later.git_dirty) == ("a" * 40, True)
    tree["rev-parse"], tree["status"] = "a" * 40, " M harness/rundir.py"  # edited meanwhile
    assert rundir.environment().git_dirty is True
    tree["status"] = ""  # edited and put back: the code loaded is the commit's again
    assert rundir.environment().git_dirty is False


def _record_with(tmp_path: Path, section: str, value) -> dict:
    data = json.loads((FIXTURES / "records_v2" / "train-d1" / "run.json").read_text())
    if section == "training":
        data["model"]["training"] = value
    else:
        data[section] = value
    return data


@pytest.mark.parametrize("section, value, where, message", [
    ("environment", {"python": "3.11.7", "shoe_size": 42}, "environment.shoe_size", "Extra inputs are not permitted"),
    ("timing", {"total_s": 1.0, "wall_seconds": 12.5}, "timing", "unknown timing key 'wall_seconds'"),
    ("training", {"run": "x", "learning_rate": 0.1}, "model.training.learning_rate", "Extra inputs are not permitted"),
    ("training", {"run": "x", "curve": [{"step": 1, "kl": 0.1}]}, "model.training.curve.0.kl", "Extra inputs"),
    ("environment", {"cpu_count": "many"}, "environment.cpu_count", "valid integer"),
])
def test_an_unknown_or_mistyped_key_in_a_typed_field_is_refused(tmp_path, section, value, where, message):
    data = _record_with(tmp_path, section, value)
    with pytest.raises(ValidationError) as info:
        RunRecord.model_validate(data)
    locations = [".".join(str(p) for p in e["loc"]) for e in info.value.errors()]
    assert where in locations and message in str(info.value), str(info.value)
    # the leaderboard skips it with one line naming the field, and builds the rest
    run_dir = tmp_path / "bad"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps(data))
    loaded = load_runs([tmp_path])
    assert not loaded.runs and where in loaded.skipped[0].reason


def test_the_open_parts_of_a_training_link_keep_any_keys():
    """``config`` and ``algorithm_config`` are the trainers' and each algorithm's own schemas: kept as given."""
    link = TrainingLink(run="x", config={"anything": [1, 2]}, algorithm_config={"plugin_knob": True})
    assert link.model_dump() == {"run": "x", "config": {"anything": [1, 2]}, "algorithm_config": {"plugin_knob": True}}
    assert TrainingLink(run_id="other-tool").run_name() == "other-tool"
    assert not TrainingLink.model_validate({})  # an empty link reads as none, as the empty dict did


RELEASE = sorted((FIXTURES / "records_3e1baa9").rglob("run.json"))


@pytest.mark.parametrize("path", RELEASE, ids=lambda p: p.relative_to(FIXTURES).parts[1])
def test_records_of_the_release_before_typed_facts_load_and_write_back_byte_for_byte(path):
    """run.json files written by release 3e1baa9 (an evaluation, a replay, a d1 run's evaluation; see
    fixtures/records_3e1baa9/README.md): the typed records read them and write them back unchanged."""
    text = path.read_text()
    record = RunRecord.model_validate(json.loads(text))
    assert isinstance(record.timing, Timing) and isinstance(record.environment, Environment)
    assert _written(record) == text


def test_the_leaderboard_loads_the_release_records():
    loaded = load_runs([FIXTURES / "records_3e1baa9"])
    assert not loaded.skipped and len(loaded.runs) == len(RELEASE) == 3
