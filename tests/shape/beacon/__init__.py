"""Beacon: a made-up lock service, as a new contributor would add a source.

The proof of the shape (issue 32): this package is a whole source — its facts,
rules, detail-pane section, JSON fields and a break action with compare-and-swap
— and lockwatch needs nothing else to show and act on its locks but one line in
the registry (which the tests add with `monkeypatch`, as a registry line would).
Its "server" is a dict in this process (`SERVER`): beacons are leases with a
fence number, dropped when their lease runs out.
"""
