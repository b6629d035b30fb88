"""The command-line kit: every tool is built from one Parser, one ``--set`` grammar and one error mapping."""

from __future__ import annotations

import argparse
import importlib
import logging
import re
from pathlib import Path

import pytest
import tomllib

from dare import __version__
from dare.harness import overrides
from dare.harness.cliutil import Parser, run_cli
from dare.harness.errors import ConfigError, DareError, InputError
from dare.harness.records import DecodingConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# the package's own command lines outside [project.scripts]: python -m dare.backends.opencompass
MODULE_TOOLS = {"python -m dare.backends.opencompass": "dare.backends.opencompass.cli:main"}
# files that turn errors into exit codes for a tool; only cliutil.run_cli may do it
CLI_FILES = ["harness/cli.py", "trainers/cli.py", "leaderboards/cli.py", "backends/opencompass/cli.py",
             "trainers/experiments/ship.py", "benchmarks/frontier_picture.py", "benchmarks/readme_figures.py"]


def _entry(ref: str):
    module, _, attr = ref.partition(":")
    return importlib.import_module(module), attr


def _subcommand_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """``()`` for the tool itself, then ``("build",)`` and so on for every (nested) subcommand."""
    paths = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += _subcommand_paths(sub, (*path, name))
    return paths


def _version(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0, argv
    return capsys.readouterr().out.strip()


def test_the_console_scripts_are_the_ones_this_test_knows():
    assert set(SCRIPTS) >= {"dare-eval", "dare-train", "dare-leaderboard"}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_console_script_and_subcommand_has_version(script, capsys):
    module, attr = _entry(SCRIPTS[script])
    parser = module.build_parser()
    assert isinstance(parser, Parser), f"{script} does not build its parser with dare.harness.cliutil.Parser"
    for path in _subcommand_paths(parser):
        assert _version(getattr(module, attr), [*path, "--version"], capsys) == f"{script} {__version__}", path


@pytest.mark.parametrize("tool", sorted(MODULE_TOOLS))
def test_module_command_lines_have_version(tool, capsys):
    module, attr = _entry(MODULE_TOOLS[tool])
    assert _version(getattr(module, attr), ["--version"], capsys) == f"{tool} {__version__}"


def test_eval_and_train_share_the_set_flag_and_grammar():
    from dare.harness.cli import build_parser as eval_parser
    from dare.trainers import cli as train_cli

    def set_action(parser):
        action = next(a for a in parser._actions if "--set" in a.option_strings)
        return type(action), action.dest, action.metavar, action.default

    assert set_action(eval_parser()) == set_action(train_cli.build_parser())
    assert isinstance(overrides.EVAL, overrides.Grammar) and isinstance(train_cli.SETS, overrides.Grammar)


def _quiet_main(main, argv: list[str]) -> int:
    root = logging.getLogger()
    handlers = list(root.handlers)
    try:
        return main(argv)
    finally:
        root.handlers[:] = handlers  # main's basicConfig must not outlive the test


@pytest.mark.parametrize("item", ["bad", "=5"])
def test_a_bad_set_is_the_same_one_line_exit_2_in_eval_and_train(item, capsys, tmp_path):
    from dare.harness.cli import main as eval_main
    from dare.trainers.cli import main as train_main

    runs = [("dare-eval", eval_main, ["--backend", "replay", "--suite", "sudoku", "--out", str(tmp_path)]),
            ("dare-train", train_main, ["--algo", "sft", "--model", "tiny-llada", "--suite", "sudoku",
                                        "--out", str(tmp_path), "--no-progress"])]
    for prog, main, args in runs:
        assert _quiet_main(main, [*args, "--set", item]) == 2, prog
        out, err = capsys.readouterr()
        assert out == "" and err == f"{prog}: error: --set: {item!r} is not KEY=VALUE\n", (prog, err)


def test_a_misspelt_set_names_the_fix_in_both_tools():
    with pytest.raises(ConfigError, match=r"^--set: unknown setting 'gen_lenght'; did you mean gen_length\?$"):
        overrides.parse(["gen_lenght=5"])
    from dare.trainers.cli import parse_sets

    with pytest.raises(ConfigError, match=r"^--set: unknown setting 'lrr'; did you mean 'lr'"):
        parse_sets(["lrr=1e-4"])


@pytest.mark.parametrize("item, fix", [("cfg=0.5", "likelihood.cfg"), ("batch=8", "likelihood.batch or batch_size"),
                                       ("sampling_eps=0.01", "likelihood.sampling_eps"),
                                       ("diffusion_steps=4", "steps"), ("pretrained=x", None)])
def test_a_scoring_option_or_an_author_s_spelling_given_bare_names_dare_s(item, fix):
    """A bare estimator option (any registered estimator's) is answered with ``likelihood.NAME``; ``pretrained`` is
    a hosted model's argument only (dare-eval takes --model-path), so here it gets the plain list."""
    with pytest.raises(ConfigError) as err:
        overrides.parse([item])
    key = item.partition("=")[0]
    assert str(err.value) == (f"--set: unknown setting {key!r}; did you mean {fix}?" if fix else
                              f"--set: unknown setting {key!r} (decoding fields: "
                              f"{', '.join(sorted(DecodingConfig.model_fields))})")


def test_a_broken_estimator_plugin_does_not_hide_the_refusal():
    from dare.harness.registry import likelihoods

    saved = likelihoods.snapshot()
    likelihoods.register("broken_mc", "no_such_module:Estimator")
    likelihoods.register("untyped_mc", "dare.harness.overrides:parse")  # registered, but with no Options
    try:
        with pytest.raises(ConfigError, match=r"^--set: unknown setting 'mc_num'; did you mean likelihood\.mc_num\?$"):
            overrides.parse(["mc_num=4"])
    finally:
        likelihoods.restore(saved)


@pytest.mark.parametrize("old, new", [("rollout_decoding.temperature=1", "rollout.temperature"),
                                      ("algorithm_settings.beta=0", "algo.beta"), ("algorithm.beta=0", "algo.beta")])
def test_config_field_spellings_are_refused_naming_the_command_line_one(old, new):
    from dare.trainers.cli import parse_sets

    with pytest.raises(ConfigError, match=rf"; use {re.escape(new)}$"):
        parse_sets([old])


def test_every_documented_set_spelling_parses():
    """The spellings README.md, trainers/README.md, tests and experiment headers use."""
    from dare.trainers.cli import parse_sets

    sets = overrides.parse(["steps=5", "decoding.gen_length=64", "threshold=0.9", "extra={dkv_refresh: 3}",
                            "engine.tp=2", "verifier.fallback=none"])
    assert sets.decoding == {"steps": 5, "gen_length": 64, "threshold": 0.9, "extra": {"dkv_refresh": 3}}
    assert sets.engine == {"tp": 2} and sets.verifier == {"fallback": "none"}
    flags = parse_sets(["lr=1e-5", "group_size=4", "algo.estimator=mdm_trajectory", "algo.estimator_args={}",
                        "decoding.gen_length=8", "rollout.temperature=1.0", "packed=true", "reward=score"])
    # PyYAML reads 1e-5 as text (YAML 1.1); TrainConfig's float field converts it, as it always has
    assert flags == {"lr": "1e-5", "group_size": 4, "algorithm_settings": {"estimator": "mdm_trajectory",
                     "estimator_args": {}}, "decoding": {"gen_length": 8}, "rollout_decoding": {"temperature": 1.0},
                     "packed": True, "reward": "score"}


def test_run_cli_maps_errors_the_same_for_every_tool(capsys):
    class Finished(DareError):
        exit_code = 1

    def raising(exc):
        def body():
            raise exc
        return body

    assert run_cli("tool", lambda: 0) == 0
    assert run_cli("tool", raising(InputError("bad thing"))) == 2
    assert capsys.readouterr().err == "tool: error: bad thing\n"
    assert run_cli("tool", raising(Finished("no scores"))) == 1
    assert run_cli("tool", raising(KeyboardInterrupt()), lambda: "rerun") == 130
    assert capsys.readouterr().err == "tool: error: no scores\ntool: interrupted; rerun\n"
    with pytest.raises(KeyboardInterrupt):
        run_cli("tool", raising(KeyboardInterrupt()))
    with pytest.raises(ZeroDivisionError):  # an internal error keeps its traceback (exit 1)
        run_cli("tool", raising(ZeroDivisionError()))


@pytest.mark.parametrize("path", CLI_FILES)
def test_no_tool_maps_errors_to_exit_codes_itself(path):
    text = (ROOT / path).read_text()
    assert "except DareError" not in text and "SystemExit(2)" not in text and not re.search(r"return 2\b", text)
    assert not re.search(r"except \(?(ConfigError|InputError|DareError)", text) and "sys.exit(2)" not in text
