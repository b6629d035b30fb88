"""Answer extraction shared by the math, Countdown and Sudoku verifiers.

Rules (tested in tests/harness/test_verifier_math.py):

- Answer tags: the content of the *last* ``<answer>...</answer>`` block (case-insensitive). A final
  ``<answer>`` that is never closed counts as a block running to the end of the text, because diffusion
  models often stop at the canvas end before writing the closing tag.
- Boxes: ``\\boxed{...}`` and ``\\fbox{...}`` with brace matching (so ``\\frac{1}{2}`` survives). Of several
  boxes the last complete one wins; a box that only wraps another box is unwrapped (``\\boxed{\\boxed{7}}``
  -> ``7``); a box left unclosed (truncated output) is ignored.
- ``####``: the rest of the line after the last ``####`` (GSM8K's answer anchor).
- Last number: the last number in the text, thousands separators and a leading ``$`` removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_HASH_ANCHOR = re.compile(r"####[ \t]*([^\n]*)")
# A number as people write it: optional sign and $, thousands groups of exactly three digits, decimals.
_NUMBER = re.compile(r"(?<![\w.])-?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_THOUSANDS_ONLY = re.compile(r"(?:\\\$|\$)?-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


@dataclass(frozen=True)
class Extraction:
    """What was taken from a completion: ``answer`` (None when nothing was found) and ``method``, one of
    ``boxed``, ``answer_tag``, ``hash``, ``last_number`` or ``none`` (callers may add their own)."""

    answer: str | None
    method: str

    @property
    def found(self) -> bool:
        return self.answer is not None


def _brace_pairs(text: str) -> dict[int, int]:
    """Index of every ``{`` -> index of its closing ``}``, in one pass (unclosed ones are absent).
    Escaped braces (``\\{``, ``\\}``: set notation) do not count."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def boxed_contents(text: str) -> list[str]:
    """Contents of the complete top-level ``\\boxed{}``/``\\fbox{}`` groups, in order. Linear in the text
    length, so a completion full of unclosed boxes cannot stall the parent."""
    pairs = _brace_pairs(text)
    out: list[str] = []
    pos = 0
    while (m := _BOX_COMMAND.search(text, pos)) is not None:
        close = pairs.get(m.end() - 1)
        if close is None:
            pos = m.end()  # unclosed: skip the command, later boxes may still be complete
            continue
        out.append(text[m.end() : close])
        pos = close + 1
    return out


def last_boxed(text: str) -> str | None:
    """The last complete box's content, with boxes that only wrap another box unwrapped."""
    contents = boxed_contents(text)
    if not contents:
        return None
    answer = contents[-1].strip()
    while (m := _BOX_COMMAND.match(answer)) is not None and _brace_pairs(answer).get(m.end() - 1) == len(answer) - 1:
        answer = answer[m.end() : -1].strip()
    return answer


def last_answer_block(text: str) -> str | None:
    """Content of the last ``<answer>`` block (an unclosed final block runs to the end), or None."""
    opens = list(_ANSWER_OPEN.finditer(text))
    if not opens:
        return None
    start = opens[-1].end()
    close = _ANSWER_CLOSE.search(text, start)
    return text[start : close.start() if close else len(text)].strip()


def hash_answer(text: str) -> str | None:
    """The rest of the line after the last ``####``, or None."""
    matches = list(_HASH_ANCHOR.finditer(text))
    if not matches:
        return None
    return matches[-1].group(1).strip()


def strip_thousands(text: str) -> str:
    """``"1,000"``/``"1{,}000"``/``"10,\\!080"``/``"$1,000"`` -> ``"1000"``; anything else unchanged.

    Only a string that is one number with comma groups of exactly three digits is rewritten, so lists
    such as ``"1,-2"`` or ``"3, 5, 7"`` keep their commas.
    """
    compact = text.replace("{,}", ",").replace("\\!", "").replace(" ", "").strip()
    if _THOUSANDS_ONLY.fullmatch(compact):
        return compact.replace(",", "").replace("\\$", "").replace("$", "")
    return text


def last_number(text: str) -> str | None:
    """The last number in ``text`` as a plain numeral (``"$1,000."`` -> ``"1000"``), or None."""
    matches = _NUMBER.findall(text)
    if not matches:
        return None
    return matches[-1].replace(",", "").replace("$", "")


def extract_math_answer(text: str, fallback: str = "last_number") -> Extraction:
    """The answer a math completion commits to.

    Order: inside the last ``<answer>`` block, its last box, else the block's text; without a block,
    the last box in the text, then the ``####`` line; then ``fallback`` (``"last_number"`` or ``"none"``).
    """
    block = last_answer_block(text)
    if block is not None:
        boxed = last_boxed(block)
        if boxed is not None:
            return Extraction(boxed, "boxed")
        return Extraction(block, "answer_tag")
    boxed = last_boxed(text)
    if boxed is not None:
        return Extraction(boxed, "boxed")
    anchored = hash_answer(text)
    if anchored:
        return Extraction(anchored, "hash")
    if fallback == "last_number":
        number = last_number(text)
        if number is not None:
            return Extraction(number, "last_number")
    return Extraction(None, "none")


def extract_tagged_answer(text: str) -> Extraction:
    """For Countdown and Sudoku: the last ``<answer>`` block (a box inside it wins), else the last box."""
    block = last_answer_block(text)
    if block is not None:
        boxed = last_boxed(block)
        return Extraction(boxed, "boxed") if boxed is not None else Extraction(block, "answer_tag")
    boxed = last_boxed(text)
    if boxed is not None:
        return Extraction(boxed, "boxed")
    return Extraction(None, "none")
