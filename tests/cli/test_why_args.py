"""`lockwatch why`'s command line: options first, then any text at all (issue 46
item 4). The real mariadb client's box of dashes is tested in
tests/mysql/test_why_mysql.py; here, what click would read as options."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize(
    "text",
    ["--------------\nSELECT 1\n--------------", "-h is no help", "--json=x", "-n 5"],
)
def test_text_is_text_whatever_it_starts_with(text: str) -> None:
    code, out, err = run_cli("why", "--json", text)
    assert code == 1 and "Usage" not in err, err
    assert f'"input":"{text}"'.replace("\n", "\\n") in out


def test_only_options_before_the_text_are_options() -> None:
    code, out, _ = run_cli("why", "--json", "--config=/nonexistent/x.toml", "a", "--json")
    assert code == 2  # the config option was read: it names no file
    code, out, err = run_cli("why", "--json", "--", "no such thing here", "--pg", "x")
    assert code == 1, err
    assert '"input":"no such thing here --pg x"' in out


def test_help_says_the_text_may_start_with_dashes() -> None:
    code, out, _ = run_cli("why", "--help")
    assert code == 0 and "whatever it starts with" in out and "read WHAT from standard" in out
