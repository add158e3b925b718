"""The query scrubber against SQL's string-literal forms: a password written in
any of the ways PostgreSQL and MySQL spell a string — '…' with doubled quotes,
E'…\\'…', U&'…', $$…$$ and $tag$…$tag$, MySQL's '…\\'…', "…" and _utf8mb4'…' —
after any of the words that introduce one (PASSWORD, IDENTIFIED BY, SET PASSWORD
= PASSWORD(…), MASTER_PASSWORD =, an FDW's OPTIONS (password …)), with comments
between the word and the literal, and the whole statement again inside a
literal (dblink_exec('… PASSWORD ''x''')). Hypothesis writes the secrets, with
quotes, backslashes and dollars in them; none of them may survive.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lockwatch.model.text import scrub_secrets

SECRETS = st.text(
    alphabet=st.sampled_from("abcXYZ019'\"\\$;-/*#&%@ \t\né€"),
    min_size=6,
    max_size=30,
).filter(lambda s: len(re.sub(r"[^a-zA-Z0-9é€]", "", s)) >= 4)


def pg_standard(secret: str) -> str:
    return "'" + secret.replace("'", "''") + "'"


def pg_escape(secret: str) -> str:
    return "E'" + secret.replace("\\", "\\\\").replace("'", "\\'") + "'"


def pg_unicode(secret: str) -> str:
    return "U&'" + secret.replace("\\", "\\\\").replace("'", "''") + "'"


def pg_dollar(secret: str) -> str:
    assume("$$" not in secret and not secret.endswith("$"))
    return f"$${secret}$$"


def pg_tagged(secret: str) -> str:
    assume("$pw$" not in secret)
    return f"$pw${secret}$pw$"


def my_single(secret: str) -> str:
    return "'" + secret.replace("\\", "\\\\").replace("'", "\\'") + "'"


def my_double(secret: str) -> str:
    return '"' + secret.replace("\\", "\\\\").replace('"', '\\"') + '"'


def my_charset(secret: str) -> str:
    return "_utf8mb4" + my_single(secret)


PG_FORMS: list[Callable[[str], str]] = [pg_standard, pg_escape, pg_unicode, pg_dollar, pg_tagged]
MY_FORMS: list[Callable[[str], str]] = [my_single, my_double, my_charset]

# Between the word and the literal.
GAPS = [" ", "/**/", " /* why */ ", "/* a /* nested */ one */", " -- why\n", "\n\t"]

PG_STATEMENTS = [
    "ALTER ROLE app WITH ENCRYPTED PASSWORD{gap}{lit}",
    "CREATE ROLE app LOGIN PASSWORD{gap}{lit} VALID UNTIL 'infinity'",
    "CREATE USER MAPPING FOR app SERVER s OPTIONS (user 'app', password{gap}{lit})",
    "ALTER SERVER s OPTIONS (SET sslpassword{gap}{lit})",
]
MY_STATEMENTS = [
    "CREATE USER 'app'@'%' IDENTIFIED BY{gap}{lit}",
    "ALTER USER app IDENTIFIED WITH caching_sha2_password BY{gap}{lit} RETAIN CURRENT PASSWORD",
    "SET PASSWORD = PASSWORD({lit})",
    "SET PASSWORD FOR 'app'@'%' ={gap}{lit}",
    "CHANGE MASTER TO MASTER_PASSWORD ={gap}{lit}, MASTER_HOST = 'db1'",
    "GRANT ALL ON *.* TO app IDENTIFIED BY{gap}{lit}",
]

# The statement as another statement's literal: what dblink_exec or an
# EXECUTE is shown with.
WRAPPERS: list[Callable[[str], str]] = [
    lambda sql: sql,
    lambda sql: f"SELECT dblink_exec('conn', {pg_standard(sql)})",
    lambda sql: f"SELECT dblink_exec('conn', {pg_escape(sql)})",
    lambda sql: f"DO $body$BEGIN EXECUTE {pg_standard(sql)}; END$body$",
    lambda sql: f"SELECT f({pg_standard(f'SELECT g({pg_standard(sql)})')})",
]


def pieces(secret: str) -> list[str]:
    """The parts of `secret` a leak would show: itself, and each run of four or
    more characters between the ones quoting rewrites."""
    runs = re.split(r"[\\'\"$]", secret)
    return [secret, *(run for run in runs if len(run.strip()) >= 4 and _WORDY.search(run))]


_WORDY = re.compile(r"[a-zA-Z0-9é€]")


def assert_hidden(text: str, secret: str) -> None:
    scrubbed = scrub_secrets(text)
    for piece in pieces(secret):
        assert piece not in scrubbed, (text, scrubbed)


@settings(max_examples=400, deadline=None)
@given(
    secret=SECRETS,
    form=st.sampled_from(PG_FORMS),
    statement=st.sampled_from(PG_STATEMENTS),
    gap=st.sampled_from(GAPS),
    wrap=st.sampled_from(WRAPPERS),
)
def test_postgres_literals_never_keep_a_password(
    secret: str,
    form: Callable[[str], str],
    statement: str,
    gap: str,
    wrap: Callable[[str], str],
) -> None:
    literal = form(secret)
    text = wrap(statement.format(gap=gap, lit=literal))
    # A secret's piece that the statement says anyway is no leak.
    fixed = wrap(statement.format(gap=gap, lit="''"))
    assume(not any(piece in fixed for piece in pieces(secret)))
    assert_hidden(text, secret)


@settings(max_examples=400, deadline=None)
@given(
    secret=SECRETS,
    form=st.sampled_from(MY_FORMS),
    statement=st.sampled_from(MY_STATEMENTS),
    gap=st.sampled_from([" ", "/**/", " /* why */ ", " -- why\n", " # why\n"]),
)
def test_mysql_literals_never_keep_a_password(
    secret: str, form: Callable[[str], str], statement: str, gap: str
) -> None:
    text = statement.format(gap=gap, lit=form(secret))
    fixed = statement.format(gap=gap, lit="''")
    assume(not any(piece in fixed for piece in pieces(secret)))
    assert_hidden(text, secret)


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        # The four, as found.
        (
            "SELECT dblink_exec('c', 'ALTER ROLE r PASSWORD ''hunter2''')",
            "SELECT dblink_exec('c', 'ALTER ROLE r PASSWORD ''***''')",
        ),
        ("ALTER ROLE r PASSWORD E'it\\'s-mine'", "ALTER ROLE r PASSWORD '***'"),
        ("ALTER ROLE r PASSWORD U&'d\\0061ta'", "ALTER ROLE r PASSWORD '***'"),
        ("ALTER ROLE r PASSWORD/**/'hidden'", "ALTER ROLE r PASSWORD/**/'***'"),
        ("ALTER ROLE r PASSWORD $$dollar$$", "ALTER ROLE r PASSWORD '***'"),
        (
            "ALTER ROLE r PASSWORD $t$a $$ b$t$ VALID UNTIL 'infinity'",
            "ALTER ROLE r PASSWORD '***' VALID UNTIL 'infinity'",
        ),
        (
            "CREATE USER 'bob'@'%' IDENTIFIED BY 'x-secret'",
            "CREATE USER 'bob'@'%' IDENTIFIED BY '***'",
        ),
        ("SET PASSWORD FOR 'bob'@'%' = 'x-secret'", "SET PASSWORD FOR 'bob'@'%' = '***'"),
        (
            "/*!80000 CREATE USER u IDENTIFIED BY 'x-secret' */",
            "/*!80000 CREATE USER u IDENTIFIED BY '***' */",
        ),
        # A commented-out statement keeps no password either.
        ("SELECT 1 -- ALTER ROLE x PASSWORD 'old'", "SELECT 1 -- ALTER ROLE x PASSWORD '***'"),
        # Cut short for display: to the end.
        ("ALTER ROLE x PASSWORD E'cut at two hundred\\'", "ALTER ROLE x PASSWORD '***'"),
    ],
)
def test_each_form_is_masked_in_place(text: str, scrubbed: str) -> None:
    assert scrub_secrets(text) == scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "SELECT E'it\\'s', $$x$$, U&'d\\0061ta', N'n', _utf8mb4'm' FROM t",
        "SELECT password FROM users WHERE name = 'bob'",
        "SELECT 'a' AS x, 'by' FROM t WHERE y = 'identified'",
        "ALTER ROLE x PASSWORD NULL VALID UNTIL '2030-01-01'",
        "SET search_path = 'public'; SELECT password_hash FROM t",
        "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql",
    ],
)
def test_innocent_literals_are_left_alone(text: str) -> None:
    assert scrub_secrets(text) == text
