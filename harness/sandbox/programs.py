"""Turn a model's completion into the program to run (trusted text processing; nothing is executed).

Two shapes are handled: a bare body that continues the prompt (base models, DARE's HumanEval prompt),
and a whole program, usually inside a markdown code block (chat models). MBPP completions continue
DARE's ``[BEGIN]`` turn and may end with ``[DONE]`` and wrap the code in quotes, like the few-shot
examples. Trailing prose after the code is cut at the longest prefix that parses.

Completion text is hostile input to this trusted process, so every step is bounded: fences are found in
one linear pass (no backtracking regex), Python's parser runs only on programs up to :data:`PARSE_LIMIT`
characters (it needs some hundred bytes of memory per character) and within a total budget while
trimming, and every parser failure (MemoryError and RecursionError included) just means "does not
parse". A longer program is sent as it is: the sandboxed child compiles it under its own limits.
"""

from __future__ import annotations

import re
import warnings

from ..pyast import parse

FENCE_LANG = re.compile(r"[ \t]*+([A-Za-z0-9_+-]*+)")
MAX_TRIM_LINES = 200
PARSE_LIMIT = 64 << 10  # characters; the parser's memory peaks near 400 bytes per character
TRIM_BUDGET = 1 << 20  # characters parsed in total while looking for the longest parsable prefix


def _parses(source: str) -> bool:
    with warnings.catch_warnings():  # model code is full of invalid escape sequences; not our concern here
        warnings.simplefilter("ignore")
        try:
            parse(source)
        except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
            return False
    return True


def fenced_blocks(text: str) -> list[str]:
    """Contents of the markdown code blocks (python or untagged), in order.

    A block opens at a triple backtick whose info string (the rest of its line) starts with the language,
    and runs to the next triple backtick or the end; each character is scanned a bounded number of times."""
    blocks, pos = [], 0
    while (start := text.find("```", pos)) >= 0:
        newline = text.find("\n", start + 3)
        if newline < 0:
            break
        lang = FENCE_LANG.match(text, start + 3, newline).group(1)
        end = text.find("```", newline + 1)
        body = text[newline + 1:] if end < 0 else text[newline + 1:end]
        if lang.lower() in ("", "python", "py", "python3"):
            blocks.append(body)
        if end < 0:
            break
        pos = end + 3
    return blocks


def trim_to_parsable(source: str) -> str:
    """The longest prefix (whole lines) of ``source`` that parses; the input itself if none does."""
    if len(source) > PARSE_LIMIT or _parses(source):
        return source
    lines = source.splitlines()
    budget = TRIM_BUDGET
    for cut in range(len(lines) - 1, max(0, len(lines) - MAX_TRIM_LINES) - 1, -1):
        head = "\n".join(lines[:cut])
        budget -= len(head)
        if budget < 0:
            break
        if head.strip() and _parses(head):
            return head + "\n"
    return source


def defines(source: str, name: str) -> bool:
    return re.search(rf"^(?:async\s++)?def\s++{re.escape(name)}\s*+\(", source, re.MULTILINE) is not None


def strip_mbpp_markers(text: str) -> str:
    """Remove DARE's [BEGIN]/[DONE] markers and the quotes the few-shot answers wrap code in."""
    text = text.split("[DONE]", 1)[0]
    if "[BEGIN]" in text:
        text = text.split("[BEGIN]", 1)[1]
    text = text.strip()
    for quote in ('"""', "'''", "'", '"'):
        if len(text) >= 2 * len(quote) and text.startswith(quote) and text.endswith(quote):
            return text[len(quote):-len(quote)]
    return text


def build_program(prompt_prefix: str | None, completion: str, entry_point: str, strip_markers: bool = False) -> str:
    """The full program: ``prompt_prefix + completion`` for a continued body, else the completion's code.

    ``prompt_prefix``: the code the completion continues (HumanEval's prompt); None when the completion
    must be a whole program (MBPP). A whole program keeps the prompt (imports, helpers) in front of it.
    """
    text = strip_mbpp_markers(completion) if strip_markers else completion
    blocks = fenced_blocks(text)
    if blocks:
        text = next((b for b in blocks if defines(b, entry_point)), blocks[0])
    text = text.replace("\r\n", "\n")
    if prompt_prefix is None or defines(text, entry_point):
        # The prompt (a stub plus any helpers it defines) goes first; the program's own def replaces the stub.
        head = prompt_prefix.rstrip("\n") + "\n\n" if prompt_prefix else ""
        return head + trim_to_parsable(text.strip("\n") + "\n")
    return trim_to_parsable(prompt_prefix + text)
