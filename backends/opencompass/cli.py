"""``python -m dare.backends.opencompass CONFIG.py [opencompass options]``: OpenCompass's CLI, failing loudly.

OpenCompass runs each task in a fresh ``python`` process that imports every ``type`` of the dumped config
by its dotted name. When one cannot be imported there (a model class defined next to the config file, a
package missing from that environment), the task logs a KeyError, and the CLI still exits 0 with ``-`` for
every score. This wrapper checks, before launching, that every type imports in a fresh interpreter of this
environment (exit 2 with one line naming it), runs OpenCompass's own ``main``, then checks that every
(model, dataset) pair has a results file with scores (exit 1 naming the pairs and the log folder).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


class OpenCompassRunFailed(DareError):
    """OpenCompass finished without scores for some (model, dataset) pairs."""

    exit_code = 1


def dotted_types(node) -> list[str]:
    """Every ``type`` of a config as OpenCompass dumps it: ``module.Class`` (builtin registry names skipped)."""
    from .configs import _types

    refs = []
    for _, value in _types(node, "config"):
        ref = value if isinstance(value, str) else f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
        if "." in ref and ref not in refs:
            refs.append(ref)
    return refs


def check_fresh_imports(refs: list[str]) -> None:
    """Every ref must be found by a fresh interpreter (as OpenCompass's task processes are) and import here."""
    proc = subprocess.run([sys.executable, "-c", _FIND_EACH, json.dumps(refs)], capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    bad = json.loads(lines[-1]) if proc.returncode == 0 and lines else [["(all)", proc.stderr.strip()[-300:]]]
    if bad:
        ref, why = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise PrerequisiteError(f"config type {ref!r} cannot be imported by OpenCompass's task processes ({why}){more}; "
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
                                   f"{' and more' if len(missing) > 5 else ''}; see the task logs in {work_dir / 'logs'}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if not argv or argv[0].startswith("-"):
            raise InputError(f"usage: {PROG} CONFIG.py [opencompass options, e.g. -w WORK_DIR]")
        require_opencompass()
        from mmengine.config import Config

        if not Path(argv[0]).is_file():
            raise InputError(f"config file {argv[0]} does not exist")
        config = Config.fromfile(argv[0])
        check_fresh_imports(dotted_types(config.to_dict()))
        work_root = Path(argv[argv.index("-w") + 1] if "-w" in argv else config.get("work_dir", "outputs/default"))
        before = set(work_root.iterdir()) if work_root.is_dir() else set()
        from opencompass.cli.main import main as opencompass_main  # 4 s of imports: only once the checks pass

        sys.argv = ["opencompass", *argv]
        opencompass_main()
        runs = sorted(set(work_root.iterdir()) - before) if work_root.is_dir() else []
        if not runs:
            raise OpenCompassRunFailed(f"OpenCompass created no run folder under {work_root}")
        check_results(runs[-1], config)
    except DareError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return exc.exit_code
    return 0
