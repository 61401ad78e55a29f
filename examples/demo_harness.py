"""What the demo extensions' pytest suites share: each scenario runs in a
fresh interpreter in its own session under a deadline (on timeout the whole
session is killed, so a hung fork child never outlives the test), and
``IN_CHILD``, the helper a scenario forks with."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

IN_CHILD = """
def in_child(body):
    # Forks; the child runs body() and leaves with 0 (1 if it raised, after
    # saying what); returns the child's exit code.
    pid = os.fork()
    if pid == 0:
        try:
            body()
        except BaseException as e:
            sys.stderr.write("child failed: %r\\n" % (e,))
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
"""


def run(code: str, timeout: float) -> subprocess.CompletedProcess:
    """Runs ``code`` in a new interpreter and session; kills the session and
    raises TimeoutExpired past ``timeout``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def ok(code: str, timeout: float) -> str:
    """``run``, which must exit 0; returns its stdout."""
    done = run(code, timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
