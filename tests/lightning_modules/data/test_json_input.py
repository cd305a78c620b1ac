"""Malformed JSON in a user's file is one InputError at FILE:LINE."""

import pytest

from lightning_modules.data.json_input import json_document, json_line
from lightning_modules.errors import InputError


def test_a_document_error_names_the_line_where_parsing_failed():
    assert json_document('{"a": [1,\n 2]}', "f.json") == {"a": [1, 2]}
    with pytest.raises(InputError) as e:
        json_document('{"a": 1,\n "b": }', "f.json")
    assert e.value.location == "f.json:2" and e.value.message.startswith("invalid JSON: ")


def test_a_line_error_names_the_given_location():
    assert json_line('{"sentence": 0}', "f.jsonl:3") == {"sentence": 0}
    with pytest.raises(InputError) as e:
        json_line("{nope", "f.jsonl:3")
    assert e.value.location == "f.jsonl:3" and "invalid JSON" in e.value.message
