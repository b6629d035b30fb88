"""benchmarks/readme_figures.py rebuilds the README's comparison tables from run records (a tiny comparison)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest
import yaml

from dare.trainers.cli import main as train_main

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "readme_figures.py"
TRAIN = {"suite": "sudoku", "steps": 1, "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 4,
         "eval_limit": 6, "lr": 1.0e-3, "decoding": {"gen_length": 8, "steps": 8, "block_length": 4}}
README = ("# Title\n\nProse.\n\n<!-- readme_figures: {name} -->\n| typed | by hand |\n"
          "<!-- /readme_figures -->\n\nMore.\n")


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("figures")
    config = root / "tiny_compare.yaml"
    config.write_text(yaml.safe_dump({"kind": "comparison", "start": {"model": "tiny-sdar"}, "train": TRAIN,
                                      "runs": [{"algorithm": "dpo"}]}))
    assert train_main(["--compare", str(config), "--out", str(root / "out")]) == 0
    return config, root / "out"


def _script(monkeypatch, capsys, *args: str) -> tuple[int, dict, str]:
    """Exit code, the last line's JSON report and stderr of one run of the script."""
    monkeypatch.setattr(sys, "argv", ["readme_figures.py", *args])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    return done.value.code, json.loads(lines[-1]) if lines else {}, captured.err


def test_tables_come_from_the_records_and_check_catches_hand_edits(compared, tmp_path, monkeypatch, capsys):
    config, out = compared
    readme = tmp_path / "README.md"
    readme.write_text(README.format(name=config))
    code, report, _ = _script(monkeypatch, capsys, str(readme), f"{config}={out}")
    assert code == 0 and report["changed"] is True
    text = readme.read_text()
    table = (out / "comparison.md").read_text().strip()  # what the runner summarised from the same records
    assert table in text and "| typed | by hand |" not in text
    assert text.startswith("# Title\n\nProse.\n") and text.endswith("<!-- /readme_figures -->\n\nMore.\n")
    assert "1 torch thread(s)" in text and "deterministic algorithms False" in text and "CPU capability" in text
    assert _script(monkeypatch, capsys, str(readme), f"{config}={out}", "--check")[0] == 0
    readme.write_text(text.replace("| dpo | dpo | ", "| dpo | dpo | 99.9 [99.0, 100.0] | ", 1))  # typed by hand
    code, report, _ = _script(monkeypatch, capsys, str(readme), f"{config}={out}", "--check")
    assert code == 1 and report["changed"] is True and "99.9" in readme.read_text()


def test_a_tagged_block_is_the_same_config_from_another_out(compared, tmp_path, monkeypatch, capsys):
    """``CONFIG@TAG=DIR`` fills the block ``CONFIG@TAG`` (the same comparison run elsewhere) and leaves the
    untagged block of CONFIG as it was."""
    config, out = compared
    readme = tmp_path / "README.md"
    readme.write_text(README.format(name=config) + README.format(name=f"{config}@xeon"))
    code, report, _ = _script(monkeypatch, capsys, str(readme), f"{config}@xeon={out}")
    assert code == 0 and report["blocks"] == [f"{config}@xeon"]
    untagged, tagged = readme.read_text().split("# Title")[1:]
    assert "| typed | by hand |" in untagged and "| typed | by hand |" not in tagged
    assert (out / "comparison.md").read_text().strip() in tagged and "CPU " in tagged


def test_a_missing_block_or_missing_records_is_one_line_exit_2(compared, tmp_path, monkeypatch, capsys):
    config, out = compared
    readme = tmp_path / "README.md"
    readme.write_text("# no blocks\n")
    code, _, err = _script(monkeypatch, capsys, str(readme), f"{config}={out}")
    assert code == 2 and err.count("\n") == 1 and "has no block for" in err
    readme.write_text(README.format(name=config))
    code, _, err = _script(monkeypatch, capsys, str(readme), f"{config}={tmp_path / 'nothing'}")
    assert code == 2 and err.count("\n") == 1 and "no evaluated start" in err


def test_the_readme_tables_equal_the_kept_records(monkeypatch, capsys):
    """README.md's comparison tables are what the kept records (docs/figures/compare/, the `--out` folders
    of the comparisons without checkpoints and caches) give: a table typed by hand, or records replaced without
    regenerating the README, fail here."""
    root = SCRIPT.parents[1]
    kept = root / "docs" / "figures" / "compare"
    code, report, err = _script(monkeypatch, capsys, str(root / "README.md"),
                                f"compare_sudoku_block={kept / 'compare-block'}",
                                f"compare_sudoku_block@xeon={kept / 'compare-block-xeon'}",
                                f"compare_sudoku_masked_lr1e4={kept / 'compare-masked-lr1e4'}",
                                f"compare_sudoku_masked={kept / 'compare-masked'}",
                                f"compare_sudoku_masked@xeon={kept / 'compare-masked-xeon'}", "--check")
    assert code == 0 and report["changed"] is False, err
