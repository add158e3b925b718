"""Bad bytes never crash or hang: they come back as invalid locks with a reason."""

from __future__ import annotations

import hashlib
import json

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.assess import assess
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_json
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.decoders import decode_file
from tests.conftest import LOCAL_HOST, NOW, ago, alive, lock_file

GENERIC = "/var/lock/thing.lock"
HINTED = {
    "clawdbot": "/srv/ws/memory/.lock",
    "gitclaw": "/repo/.GITCLAW/state/locks/12.lock",
    "tower-fleet/v1": "/root/tower-fleet/logs/locks/deploy-app.lock",
    "little-loops": "/home/dev/proj/.loops/.running/fix.lock",
}
EVERY_PATH = {"generic": GENERIC, **HINTED}


def decode(raw: bytes | str, path: str = GENERIC) -> Lock:
    return decode_file(lock_file(path, raw, mtime=ago(7)))


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(alive(100)), FrozenClock(NOW), LOCAL_HOST)


def assert_invalid(lock: Lock, code: str, fmt: str = "generic") -> None:
    assert lock.format == fmt
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == (code,)
    # Still a full record: shown with its hash and age, never dropped.
    assert lock.acquired_at == ago(7)
    assert verdict.age_seconds == pytest.approx(7.0)
    json.dumps(lock_json(lock, verdict), allow_nan=False)


# --- binary and encodings -------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00",
        b"\x00\x00\x00\x00",
        b'{"pid": 100}\x00',
        b"12345\x00",
        bytes(range(256)),
        b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 56,
        '{"pid": 100}'.encode("utf-16"),
        '{"pid": 100}'.encode("utf-32-le"),
    ],
    ids=["nul", "nuls", "json-nul", "pid-nul", "all-bytes", "elf", "utf16", "utf32"],
)
@pytest.mark.parametrize("fmt", EVERY_PATH)
def test_binary_is_unparseable(raw: bytes, fmt: str) -> None:
    lock = decode(raw, EVERY_PATH[fmt])
    assert_invalid(lock, "unparseable", fmt)
    assert lock.sha256 == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe\xfd",
        b'{"pid": 100, "host": "caf\xe9"}',  # latin-1
        b"\xc3\x28",
        b"\xed\xa0\x80",  # a UTF-8 encoded surrogate
        b"12345\xff",
        b"\xe2\x82",  # truncated sequence
    ],
)
@pytest.mark.parametrize("fmt", EVERY_PATH)
def test_invalid_utf8_is_unparseable(raw: bytes, fmt: str) -> None:
    assert_invalid(decode(raw, EVERY_PATH[fmt]), "unparseable", fmt)


def test_utf8_bom_never_crashes() -> None:
    lock = decode(b'\xef\xbb\xbf{"pid": 100}')
    # Either read through the BOM or reported; never an exception.
    assert lock.holder.pid == 100 or judge(lock).codes == ("unparseable",)


# --- JSON that parses to nothing useful ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 100_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        '{"pid": 100, "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["open-lists", "closed-lists", "open-objects", "closed-objects", "nested-field"],
)
@pytest.mark.parametrize("fmt", EVERY_PATH)
def test_deeply_nested_json_does_not_raise(text: str, fmt: str) -> None:
    assert_invalid(decode(text, EVERY_PATH[fmt]), "unparseable", fmt)


@pytest.mark.parametrize(
    ("template", "path"),
    [
        ('{{"pid": {v}}}', GENERIC),
        ('{{"session_id": "m", "acquired_at": {v}}}', HINTED["clawdbot"]),
        ("{v}", HINTED["clawdbot"]),
        ('{{"issueNumber": {v}}}', HINTED["gitclaw"]),
        ('{{"loop_name": "fix", "scope": {v}}}', HINTED["little-loops"]),
        ('{{"lock_version": "v1", "pid": {v}}}', HINTED["tower-fleet/v1"]),
    ],
    ids=["generic", "clawdbot", "clawdbot-list", "gitclaw", "little-loops", "tower-fleet"],
)
def test_nesting_around_the_recursion_limit_does_not_raise(template: str, path: str) -> None:
    # Sweep every depth across the interpreter's limit: json parses up to some depth
    # that depends on the caller's stack; whatever is reported about it must not recurse.
    for depth in range(600, 1100):
        value = "[" * depth + "]" * depth
        lock = decode(template.format(v=value), path)
        assert judge(lock).state is State.INVALID, depth


@pytest.mark.parametrize(
    "text",
    [
        '{"pid": NaN}',
        '{"pid": 100, "acquired_at": Infinity}',
        '{"pid": 100, "time": -Infinity}',
        "NaN",
        "Infinity",
        "[NaN]",
    ],
)
@pytest.mark.parametrize("fmt", EVERY_PATH)
def test_nan_and_infinity_literals_are_unparseable(text: str, fmt: str) -> None:
    assert_invalid(decode(text, EVERY_PATH[fmt]), "unparseable", fmt)


@pytest.mark.parametrize(
    "text", ['{"pid": 100, "x": 1e999}', '{"pid": 100, "time": -1e400}', "[1e999]"]
)
def test_overflowing_number_literals_never_reach_the_json_contract(text: str) -> None:
    lock = decode(text)
    verdict = judge(lock)
    json.dumps(lock.content, allow_nan=False)
    json.dumps(lock_json(lock, verdict), allow_nan=False)


def test_integer_with_too_many_digits_is_unparseable() -> None:
    assert_invalid(decode('{"pid": ' + "1" * 5000 + "}"), "unparseable")
    assert_invalid(decode("1" * 5000), "unparseable")


@pytest.mark.parametrize(
    "text", ["[1, 2, 3]", "[]", '"12345"', '"a string"', "12345.0", "1e3", "true", "null", "-0.5"]
)
def test_top_level_json_that_is_no_record_is_unparseable(text: str) -> None:
    lock = decode(text)
    assert_invalid(lock, "unparseable")
    assert lock.content == json.loads(text)


@pytest.mark.parametrize("text", ["[1, 2, 3]", '"12345"', "12345.0", "true", "null", "12345"])
@pytest.mark.parametrize("fmt", HINTED)
def test_top_level_json_at_a_hinted_location_is_that_format_invalid(text: str, fmt: str) -> None:
    lock = decode(text, HINTED[fmt])
    assert_invalid(lock, "schema_violation", fmt)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "\n",
        "garbage",
        "{",
        '{"pid": 100',
        "12345 host extra words",
        "<html><body>502</body></html>",
        "pid: 100\nhost: a\n",
    ],
)
@pytest.mark.parametrize("fmt", HINTED)
def test_hinted_location_with_garbage_is_that_format_invalid(raw: str, fmt: str) -> None:
    path = HINTED[fmt]
    lock = decode(raw, path)
    assert_invalid(lock, "unparseable", fmt)
    assert lock.path == path
    assert lock.id == f"file:{path}"


def test_unparseable_content_is_kept_as_a_bounded_preview() -> None:
    text = "x" * 60_000
    lock = decode(text)
    assert_invalid(lock, "unparseable")
    assert isinstance(lock.content, str)
    assert text.startswith(lock.content)
    assert 0 < len(lock.content) <= 4096


def test_json_object_with_unknown_keys_is_a_generic_lock() -> None:
    lock = decode('{"who": "me", "why": "because"}')
    assert lock.format == "generic"
    assert judge(lock).state is State.ACTIVE


@pytest.mark.parametrize("fmt", EVERY_PATH)
def test_bad_input_survives_assess_together(fmt: str) -> None:
    raws: list[bytes | str] = [b"\x00", b"\xff", "[" * 50_000, "NaN", "[]", "", "junk junk junk"]
    locks = [decode(raw, EVERY_PATH[fmt]) for raw in raws]
    assessed = assess(locks, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    expected = [State.INVALID] * len(raws)
    if fmt == "generic":
        expected[raws.index("")] = State.ACTIVE  # an empty generic file is a pid-less lock
        # A few words are a note (issue 33): a pid-less lock, its words its holder's.
        expected[raws.index("junk junk junk")] = State.ACTIVE
    assert [v.state for _, v in assessed] == expected
    assert [lock for lock, _ in assessed] == locks
