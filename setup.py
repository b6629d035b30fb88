"""Maps the top-level folders onto the ``dare`` namespace (metadata lives in pyproject.toml).

The folders are the architecture (harness/, backends/, trainers/, leaderboards/, configs/), so each
one and its sub-packages become ``dare.<folder>...`` through package_dir.
"""

from setuptools import find_packages, setup

FOLDERS = ("harness", "backends", "trainers", "leaderboards", "configs")

packages = ["dare"]
package_dir = {"dare": "dare"}
for folder in FOLDERS:
    packages.append(f"dare.{folder}")
    package_dir[f"dare.{folder}"] = folder
    for sub in find_packages(where=folder):
        name = f"dare.{folder}.{sub}"
        packages.append(name)
        package_dir[name] = f"{folder}/" + sub.replace(".", "/")

setup(packages=packages, package_dir=package_dir)
