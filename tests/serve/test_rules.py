"""The shipped alert rules: valid for Prometheus, each alert tested firing and not
firing (promtool's unit tests), and written against metrics serve exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from lockwatch.serve.metrics import Figures, families
from tests.serve.conftest import binary

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "prometheus" / "lockwatch-rules.yml"
UNIT_TESTS = Path(__file__).parent / "prometheus" / "lockwatch-rules.test.yml"


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_every_alert_fires_and_holds_back_in_promtool_unit_tests() -> None:
    done = promtool("test", "rules", UNIT_TESTS.name, cwd=UNIT_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_a_broken_expectation_fails_promtool(tmp_path: Path) -> None:
    """The unit tests can fail: the stale-lock alert expected a minute early."""
    text = UNIT_TESTS.read_text().replace(
        "../../../docs/prometheus/lockwatch-rules.yml", str(RULES)
    )
    early = "- eval_time: 4m\n        alertname: LockwatchLockStale\n        exp_alerts:"
    broken = text.replace(f"{early} []", f"{early} [{{exp_labels: {{severity: warning}}}}]")
    assert broken != text
    (tmp_path / "broken.test.yml").write_text(broken)
    done = promtool("test", "rules", "broken.test.yml", cwd=tmp_path)
    assert done.returncode != 0


def _rules() -> dict[str, str]:
    """Each alert's text in the rules file (from its `- alert:` line to the next)."""
    parts = re.split(r"\n      - alert: ", RULES.read_text())[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def test_each_alert_is_unit_tested_and_says_what_to_run() -> None:
    tests = UNIT_TESTS.read_text()
    rules = _rules()
    assert len(rules) == 8
    for name, text in rules.items():
        assert f"alertname: {name}\n" in tests, f"{name} has no unit test"
        assert "summary:" in text and "description:" in text, name
        assert "`lockwatch " in text, f"{name} names no command to run"


def test_rules_use_only_metrics_serve_exports() -> None:
    exported = {family.name for family in families(Figures())}
    used = set()
    for text in _rules().values():
        expr = re.search(r"expr: (.*)", text)
        assert expr is not None
        used.update(re.findall(r"\b(lockwatch_[a-z_]+)", expr.group(1)))
    assert used, "no lockwatch metric in the rules"
    assert used <= exported, used - exported
