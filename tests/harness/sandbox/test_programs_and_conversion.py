"""Completion -> program extraction, and the trusted AST conversion of assert-style tests."""

from __future__ import annotations

import ast

from dare.harness.data import load_samples
from dare.harness.sandbox.assert_tests import rewrite
from dare.harness.sandbox.programs import build_program, strip_mbpp_markers

PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'


def test_bare_body_continues_the_prompt():
    program = build_program(PROMPT, "    return a + b\n", "add")
    assert program == PROMPT + "    return a + b\n"


def test_markdown_whole_program_is_extracted_and_keeps_the_prompt_helpers():
    completion = "Sure! Here it is:\n```python\nimport math\n\ndef add(a, b):\n    return a + b\n```\nHope it helps."
    program = build_program(PROMPT, completion, "add")
    assert program.startswith(PROMPT) and "import math" in program and "Hope" not in program
    ast.parse(program)


def test_the_block_defining_the_entry_point_wins():
    completion = "```\nprint('usage')\n```\n```python\ndef add(a, b):\n    return a + b\n```"
    assert "return a + b" in build_program(None, completion, "add")


def test_trailing_prose_is_cut_at_the_longest_parsable_prefix():
    program = build_program(PROMPT, "    return a + b\n\nThis function adds the numbers.\n", "add")
    assert program.rstrip().endswith("return a + b")


def test_mbpp_markers_and_quotes():
    completion = " 'def add(a, b):\r\n  return a + b' \n[DONE] \n\n You are an expert"
    assert strip_mbpp_markers(completion) == "def add(a, b):\r\n  return a + b"
    assert (build_program(None, "[BEGIN]\n" + completion, "add", strip_markers=True)
            == "def add(a, b):\n  return a + b\n")
    assert build_program(None, "```python\ndef add(a, b):\n    return a + b\n```\n[DONE]", "add",
                         True).startswith("def add")


def test_assert_shapes_are_classified():
    test = ("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2)\n"
            "    assert not candidate(3)\n"
            "    assert abs(candidate(4) - 1.0) < 1e-6\n    assert set(add(5)) == {1}\n")
    rewritten = rewrite(test, "add", call_after="check")
    assert rewritten.site_kinds == ("eq", "truthy", "falsy", "judge", "judge")
    assert rewritten.needs_judge
    assert "candidate(" not in rewritten.source and "add(" not in rewritten.source
    assert rewritten.source.rstrip().endswith("check(None)")
    assert rewritten.site_args[0] == "((1,), {})"


def test_real_datasets_convert():
    he = [rewrite(s.metadata["test"], s.metadata["entry_point"], "check") for s in load_samples("humaneval.jsonl")]
    assert sum(r.needs_judge for r in he) < 20 and all(r.site_kinds for r in he)
    mbpp = [rewrite("\n".join(s.metadata["test_list"]), s.metadata["entry_point"]) for s in load_samples("mbpp.jsonl")]
    assert all(r.site_kinds and not r.needs_judge for r in mbpp)
