"""Issue 47 item 3: a monitor user without PROCESS sees only its own sessions. `ls`
said "No locks on mysql…" and exited 0 while five sessions held locks; the GRANT
hint was in `--json` alone. Now the table's run says what is hidden and how to
see it, never "No locks on" that server, and exits 1 as for any source read in
part (docs/commands.md); the dashboard's header and empty state say so too.

Against the real MariaDB: a user of a unique name without PROCESS, dropped at the
end; five root sessions holding GET_LOCKs (killed at teardown)."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator

import pytest
from rich.console import Console

from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.sources.mysql.dsn import parse
from lockwatch.sources.mysql.server import MyServer
from lockwatch.ui.panels import EmptyState, status_text
from tests.conftest import NOW
from tests.mysql.conftest import (  # noqa: F401 - fixtures, used by name
    GROUP,
    MyHarness,
    my,
    my_dsn,
)
from tests.ui.fakes import make_app, settle

pytestmark = [pytest.mark.mysql, GROUP]


@pytest.fixture
def monitor(my: MyHarness) -> Iterator[str]:  # noqa: F811 - the fixture imported above
    """A DSN of a fresh user without PROCESS, while five other sessions hold locks."""
    user = f"{my.prefix}_mon"
    my.admin_rows(f"CREATE USER '{user}'@'127.0.0.1'")
    try:
        for n in range(5):
            my.run(my.session(), f"SELECT GET_LOCK('{my.prefix}-held-{n}', 0)")
        yield f"mysql://{user}@127.0.0.1:{my.endpoint.port}/"
    finally:
        my.admin_rows(f"DROP USER '{user}'@'127.0.0.1'")


def test_ls_never_says_no_locks_for_what_it_could_not_see(monitor: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--mysql", monitor],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert "No locks on mysql" not in done.stdout
    assert "that lockwatch's user may see on mysql" in done.stdout
    assert "GRANT PROCESS ON *.*" in done.stderr
    assert done.returncode == 1, (done.stdout, done.stderr)


async def test_the_dashboard_says_its_view_is_partial(monitor: str) -> None:
    server = MyServer(parse(monitor, {}))
    try:
        polled = server.poll()
    finally:
        server.close()
    (status,) = polled.statuses
    assert status.partial and status.state == "connected"
    header = status_text(status, NOW).plain
    assert "partial view" in header and "GRANT PROCESS ON *.*" in header
    shown = SourceStatus(status.kind, status.name, status.state, status.reason, NOW, None, True)
    app = make_app([ChangeSet("mysql", NOW, (shown,), full=True)])
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        console = Console(width=1000, record=True, file=io.StringIO())
        console.print(app.query_one("#empty", EmptyState).content)
        said = " ".join(console.export_text().split())
    assert "No locks right now" not in said
    assert said.startswith("No locks that lockwatch may see right now"), said
    assert "GRANT PROCESS ON *.*" in said
