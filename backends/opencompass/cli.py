"""``python -m dare.backends.opencompass CONFIG.py [opencompass options]``: OpenCompass's CLI, failing loudly.

OpenCompass runs each task in a fresh ``python`` process that imports every ``type`` of the dumped config
by its dotted name. When one cannot be imported there (a model class defined next to the config file, a
package missing from that environment), the task logs a KeyError, and the CLI still exits 0 with ``-`` for
every score. This wrapper checks, before launching, that every type imports in a fresh interpreter of this
environment (exit 2 with one line naming it), runs OpenCompass's own ``main``, then checks that every
(model, dataset) pair has a results file with scores (exit 1 naming the pairs and the log folder). With
``-r`` / ``--reuse`` the checked folder is the reused one. Before launching it says on stderr which
datasets' ``max_out_len`` a DARE model replaces by its ``gen_length``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dare.harness.cliutil import Parser, run_cli
from dare.harness.errors import DareError, InputError, PrerequisiteError

from . import require_opencompass

PROG = "python -m dare.backends.opencompass"

# Locating a module (find_spec) imports only its parent packages: cheap, and enough to see what a task
# process can reach; the attributes themselves are checked in this process, where OpenCompass is loaded.
_FIND_EACH = """import importlib.util, json, sys
bad = []
for ref in json.loads(sys.argv[1]):
    module = ref.rpartition(".")[0]
    try:
        found = importlib.util.find_spec(module) is not None
        why = "" if found else f"No module named {module!r}"
    except Exception as exc:
        found, why = False, f"{type(exc).__name__}: {exc}"
    if not found:
        bad.append([ref, why])
print(json.dumps(bad))
"""


LAZY_IMPORT_FIX = ("mmengine reads a config with a top-level import of a package in 'lazy' mode, where imported "
                   "functions cannot be called; import the builders inside the base block instead: "
                   "`with read_base(): from dare.opencompass import dare_datasets, dare_model`")


class OpenCompassRunFailed(DareError):
    """OpenCompass finished without scores for some (model, dataset) pairs."""

    exit_code = 1


def dotted_types(node) -> list[str]:
    """Every ``type`` of a config as OpenCompass dumps it: ``module.Class`` (builtin registry names skipped)."""
    from .configs import _types

    refs = []
    for _, value in _types(node, "config"):
        ref = (value if isinstance(value, str)
               else f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}")
        if "." in ref and ref not in refs:
            refs.append(ref)
    return refs


def check_fresh_imports(refs: list[str]) -> None:
    """Every ref must be found by a fresh interpreter (as OpenCompass's task processes are) and import here."""
    proc = subprocess.run([sys.executable, "-c", _FIND_EACH, json.dumps(refs)], capture_output=True, text=True,
                          timeout=300)
    lines = proc.stdout.strip().splitlines()
    bad = json.loads(lines[-1]) if proc.returncode == 0 and lines else [["(all)", proc.stderr.strip()[-300:]]]
    if bad:
        ref, why = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise PrerequisiteError(f"config type {ref!r} cannot be imported by OpenCompass's task processes "
                                f"({why}){more}; "
                                "define it in an installed package or put its folder on PYTHONPATH")
    from .configs import check_importable

    check_importable([{"type": ref} for ref in refs])


def check_results(work_dir: Path, config) -> None:
    """Every (model, dataset) pair of ``config`` has a results file without an error."""
    from opencompass.utils import dataset_abbr_from_cfg, model_abbr_from_cfg

    missing = []
    for model in config["models"]:
        for dataset in config["datasets"]:
            path = work_dir / "results" / model_abbr_from_cfg(model) / f"{dataset_abbr_from_cfg(dataset)}.json"
            if not path.is_file() or "error" in json.loads(path.read_text()):
                missing.append(f"{model_abbr_from_cfg(model)}/{dataset_abbr_from_cfg(dataset)}")
    if missing:
        raise OpenCompassRunFailed(f"OpenCompass produced no scores for {', '.join(missing[:5])}"
                                   f"{' and more' if len(missing) > 5 else ''}; "
                                   f"see the task logs in {work_dir / 'logs'}")


def option(argv: list[str], *names: str, const: str | None = None) -> str | None:
    """The value of an OpenCompass option (``-r X``, ``--reuse=X``; ``const`` when given bare), else None."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name:
                follows = argv[i + 1] if i + 1 < len(argv) else None
                return follows if follows is not None and not follows.startswith("-") else const
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def run_folder(work_root: Path, before: set[Path], reuse: str | None) -> Path | None:
    """The folder OpenCompass wrote this time: a new one, else (``--reuse``) the reused one."""
    runs = sorted(set(work_root.iterdir()) - before) if work_root.is_dir() else []
    if runs:
        return runs[-1]
    if reuse and work_root.is_dir():
        if reuse == "latest":
            folders = sorted(p for p in work_root.iterdir() if p.is_dir())
            return folders[-1] if folders else None
        return work_root / reuse if (work_root / reuse).is_dir() else None
    return None


def length_notices(config) -> list[str]:
    """One line per (DARE model, dataset) whose ``max_out_len`` the model's ``gen_length`` replaces."""
    notes = []
    for model in config.get("models", []):
        if not str(model.get("type", "")).endswith("DareModel") or model.get("max_out_len") is None:
            continue
        for dataset in config.get("datasets", []):
            asked = (dataset.get("infer_cfg") or {}).get("inferencer", {}).get("max_out_len")
            if asked is not None and asked != model["max_out_len"]:
                notes.append(f"note: {model.get('abbr')} decodes gen_length={model['max_out_len']} tokens on "
                             f"{dataset.get('abbr')}, not its max_out_len={asked} (DARE's decoding setting wins; "
                             "set decoding=dict(gen_length=...) in dare_model to change it)")
    return notes


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only --version is ours; every other option is OpenCompass's and passes through untouched (argv
    # itself, not argparse's leftovers, so nothing is reordered or abbreviated).
    Parser(prog=PROG, tool=PROG, add_help=False, allow_abbrev=False).parse_known_args(argv)
    return run_cli(PROG, lambda: _run(argv))


def _run(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        raise InputError(f"usage: {PROG} CONFIG.py [opencompass options, e.g. -w WORK_DIR]")
    require_opencompass()
    from mmengine.config import Config

    if not Path(argv[0]).is_file():
        raise InputError(f"config file {argv[0]} does not exist")
    try:
        config = Config.fromfile(argv[0])
    except RuntimeError as exc:
        if str(exc):
            raise
        raise InputError(f"{argv[0]}: {LAZY_IMPORT_FIX}") from None
    check_fresh_imports(dotted_types(config.to_dict()))
    for note in length_notices(config):
        sys.stderr.write(note + "\n")
    work_root = Path(option(argv, "-w", "--work-dir") or config.get("work_dir", "outputs/default"))
    before = set(work_root.iterdir()) if work_root.is_dir() else set()
    from opencompass.cli.main import main as opencompass_main  # 4 s of imports: only once the checks pass

    sys.argv = ["opencompass", *argv]
    opencompass_main()
    folder = run_folder(work_root, before, option(argv, "-r", "--reuse", const="latest"))
    if folder is None:
        raise OpenCompassRunFailed(f"OpenCompass created no run folder under {work_root}")
    check_results(folder, config)
    return 0
