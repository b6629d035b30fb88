"""The base of every serialised record and the hashing and JSON forms the records are written in."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

JsonDict = dict[str, Any]


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every hash in the project is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    # surrogatepass: a lone surrogate (replayed completion text can hold one) hashes instead of raising;
    # every other string hashes exactly as plain UTF-8
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def json_text(obj: Any, **kwargs: Any) -> str:
    """JSON as readable UTF-8 text, for the files a run writes. A string holding a lone surrogate cannot be
    UTF-8, so such a document is written ASCII-escaped instead (``\\ud800``): it still encodes, and reads back
    to the same string."""
    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, ensure_ascii=True, **kwargs)
    return text


class Record(BaseModel):
    """Base of every serialised record: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class GivenFieldsRecord(Record):
    """A record that serialises only the fields it was given (a ``None`` given stays ``null``): run.json
    tells "not recorded" (key absent) from "recorded as unknown" (``null``), as it did when these were dicts."""

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> JsonDict:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}
