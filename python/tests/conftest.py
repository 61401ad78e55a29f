"""Shared helpers: every process-level check has its own deadline and
fails (killing what it started) rather than hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import pytest

import forksafe


@pytest.fixture
def eng():
    """A fresh engine, shut down after the test."""
    e = forksafe.Engine(compute_workers=2, host_workers=2)
    yield e
    e.shutdown()


def run_python(code: str, timeout: float = 30.0, env: dict | None = None):
    """Runs `code` in a fresh interpreter; returns (rc, stdout, stderr,
    seconds). A run past `timeout` is killed and fails the test."""
    start = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            # Not python/: there `import forksafe` would find the source
            # folder instead of the installed package.
            cwd=tempfile.gettempdir(),
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"subprocess hung (> {timeout}s); stdout={e.stdout!r} stderr={e.stderr!r}")
    return p.returncode, p.stdout, p.stderr, time.monotonic() - start


def wait_child(pid: int, timeout: float = 20.0) -> int:
    """Waits for a forked child; kills it and fails if it outlives
    `timeout`. Returns its exit code."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"fork child {pid} hung (> {timeout}s)")
        time.sleep(0.005)


def in_child(body) -> None:
    """Runs `body()` in a fork child and leaves with os._exit: 0 if it
    returned, 1 if it raised (the traceback goes to stderr). Never returns
    into pytest."""
    code = 1
    try:
        body()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)
