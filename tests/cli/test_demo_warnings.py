"""`lockwatch demo` as root with no XDG_RUNTIME_DIR prints no platformdirs
RuntimeDirWarning (issue 46, item 10): pgserver asks platformdirs for a runtime
directory, in the demo's process and in the Pythons it starts."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import platformdirs

from lockwatch.cli.demo import quiet_runtime_dir_warning

ASK = "import platformdirs; platformdirs.user_runtime_path('python_PostgresServer')"


def _without_runtime_dir() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "PYTHONWARNINGS")}


def test_a_python_the_demo_starts_says_nothing_of_the_runtime_dir() -> None:
    env = _without_runtime_dir()
    before = subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True)
    quiet_runtime_dir_warning(env)
    after = subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True)
    # platformdirs says it where /run/user/<uid> is not the user's private directory.
    if "RuntimeDirWarning" in before.stderr:
        assert "XDG_RUNTIME_DIR" in before.stderr
    assert after.returncode == 0
    assert "Warning" not in after.stderr


def test_the_demos_own_process_says_nothing_of_it_and_keeps_other_warnings() -> None:
    env = {"PYTHONWARNINGS": "error::DeprecationWarning"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_runtime_dir_warning(env)
        warnings.warn(
            "XDG_RUNTIME_DIR is not set, falling back to /run/user/0", UserWarning, stacklevel=1
        )
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else"]
    assert env["PYTHONWARNINGS"] == "error::DeprecationWarning,ignore:XDG_RUNTIME_DIR"
    assert platformdirs.RuntimeDirWarning is not None
