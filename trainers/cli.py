"""dare-train: not available yet in this release."""

import sys


def main(argv: list[str] | None = None) -> int:
    sys.stderr.write("dare-train: error: training is not available yet in this version of dare-dllm\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
