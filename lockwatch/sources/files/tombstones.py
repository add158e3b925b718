"""Where lockwatch moves the lock files it breaks: beside each lock, by default.
Apart from the scanner (which skips these directories) so that what names them
in a plan costs no scanner import."""

from __future__ import annotations

TOMBSTONE_DIR = ".lockwatch-broken"
