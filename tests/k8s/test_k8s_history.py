"""Issue 45 meets issue 44: a Kubernetes Lease's hand-over recorded into the
history as `serve` records it (the real feed, the recorder, a history file),
then asked back as an episode and through `lockwatch history --json`. The fake
API server of this package's conftest (an imitation: no kube-apiserver
installs here), written as client-go's leader election writes a Lease and a
LeaseCandidate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from lockwatch.model.changes import Entry
from lockwatch.model.history import Episode
from lockwatch.serve.watcher import Watcher
from tests.conftest import run_cli
from tests.history.harness import reader, recording, wait_until
from tests.k8s.conftest import kubeconfig, lease
from tests.k8s.fakeapi import FakeApi, micro

POLL = 0.2


def _entries(watcher: Watcher, source: str) -> list[Entry]:
    return [e for e in list(watcher.board.entries.values()) if e.lock.source == source]


def _seen(watcher: Watcher, source: str, test: Callable[[Entry], bool]) -> Callable[[], bool]:
    return lambda: any(test(entry) for entry in _entries(watcher, source))


def _one_episode(history: Path, source: str) -> Episode:
    found = [e for e in reader(history).episodes(source=source) if e.waiters]
    assert len(found) == 1, found
    return found[0]


def _candidate(fake: FakeApi, name: str, lease_name: str) -> None:
    from datetime import UTC, datetime

    now = micro(datetime.now(UTC))
    spec = {
        "leaseName": lease_name,
        "binaryVersion": "1.33.1",
        "emulationVersion": "1.33",
        "strategy": "OldestEmulationVersion",
    }
    fake.put("leasecandidates", "apps", name, {**spec, "renewTime": now, "pingTime": now})


def _lease_held_by(watcher: Watcher, holder: str, state: str) -> Callable[[], bool]:
    def test(entry: Entry) -> bool:
        facts: Any = entry.lock.facts
        return bool(
            entry.lock.format == "k8s-lease"
            and facts.holder == holder
            and entry.verdict.state.value == state
        )

    return _seen(watcher, "k8s", test)


@pytest.mark.parametrize("ending", ["holder_died", "released"])
def test_a_lease_hand_over_is_an_episode_ended_as_client_go_says(
    ending: str,
    fake: FakeApi,
    certificate: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A LeaseCandidate waits on the Lease's holder. `holder_died`: the holder
    stops renewing, lockwatch sees the Lease past due (client-go's rule: a
    candidate takes it now), and the candidate takes it. `released`: the
    holder gives it up (holderIdentity emptied, as ReleaseOnCancel does)
    first. `lockwatch history --json` shows the episode."""
    ca = {"certificate-authority": certificate[0]}
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", fake.url, cluster=ca)))
    history = tmp_path / "history.sqlite3"
    lease(fake, "apps", "worker", "worker-0", renewed=0, duration=3)
    _candidate(fake, "worker-1", "worker")
    with recording(["--k8s"], history, POLL) as watcher:
        wait_until(_lease_held_by(watcher, "worker-0", "active"), "the holder seen")
        wait_until(
            _seen(watcher, "k8s", lambda e: e.verdict.state.value == "waiting"), "the candidate"
        )
        if ending == "holder_died":
            wait_until(_lease_held_by(watcher, "worker-0", "stale"), "the Lease past due")
        else:
            lease(fake, "apps", "worker", None, renewed=0, duration=1)
            wait_until(_lease_held_by(watcher, "", "free"), "the Lease released")
        lease(fake, "apps", "worker", "worker-1", renewed=0, duration=2, transitions=1)
        wait_until(_lease_held_by(watcher, "worker-1", "active"), "the candidate holding")
    episode = _one_episode(history, "k8s")
    assert episode.blocker.application == "worker-0"
    assert [w.application for w in episode.waiters] == ["worker-1"]
    assert [w.outcome for w in episode.waiters] == ["acquired"]
    assert episode.ended_by == ending
    assert episode.resource == "apps/worker"
    code, out, err = run_cli("history", "--history", str(history), "--since", "-1h", "--json")
    assert code == 0, err
    (shown,) = [e for e in orjson.loads(out)["episodes"] if e["source"] == "k8s"]
    assert shown["id"] == episode.id and shown["ended_by"] == ending
    assert shown["waiters"][0]["outcome"] == "acquired"
