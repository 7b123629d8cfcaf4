"""tailscope.lab.procstat against a child with a known number of spinning threads.

The child's threads spin inside hashlib.sha256 on a 4 MiB buffer, which releases the GIL, so
all of them are runnable (state R) at once whatever the number of cores; on a machine with fewer
cores than spinning threads some of them must wait in the run queue.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tailscope.lab import procstat

SPINNER = r"""
import hashlib, sys, threading
buf = b"x" * (4 << 20)
def spin():
    while True:
        hashlib.sha256(buf).digest()
for _ in range(int(sys.argv[1])):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()  # the main thread sleeps until the test closes stdin
"""


def spinning_child(threads: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", SPINNER, str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def sample(pid: int, seconds: float) -> dict:
    s = procstat.ProcSampler({"child": pid}, interval_s=0.1)
    s.start()
    time.sleep(seconds)
    return s.stop()


def sample_spinning_child(threads: int, seconds: float) -> dict:
    """The sampler's view of a child spinning `threads` threads for `seconds`; the child is
    killed afterwards, also when sampling fails."""
    proc = spinning_child(threads)
    try:
        return sample(proc.pid, seconds)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_runnable_threads_of_a_child_are_counted(threads):
    got = sample_spinning_child(threads, 1.5)
    child = got["processes"]["child"]
    assert got["samples"] >= 5
    assert child["threads_max"] == threads + 1  # the spinners and the sleeping main thread
    assert child["runnable_threads_mean"] == pytest.approx(threads, abs=0.5)
    assert child["uninterruptible_threads_mean"] == pytest.approx(0, abs=0.5)
    if threads:
        assert child["cpu_pct"] > 0
        assert child["involuntary_ctx_switches"] + child["voluntary_ctx_switches"] > 0
    # The system's instantaneous load counts at least the child's runnable threads.
    assert got["system"]["instantaneous_load_mean"] >= threads - 0.5


def test_more_spinning_threads_than_cores_wait_in_the_run_queue():
    cpus = len(os.sched_getaffinity(0))
    got = sample_spinning_child(cpus + 2, 1.0)
    child = got["processes"]["child"]
    if child.get("runqueue_wait_ns") is None:
        pytest.skip(child.get("runqueue_wait_unavailable", "no schedstat"))
    # cpus + 2 runnable threads on `cpus` cores: at least 2 threads' worth of the window is spent waiting.
    assert child["runqueue_wait_ns"] > 0.5 * got["window_s"] * 1e9
    assert child["involuntary_ctx_switches"] > 0  # preempted to share the cores


def test_summary_says_which_load_is_which_and_counts_its_own_cost():
    got = sample(os.getpid(), 0.3)
    assert {"loadavg_1m_end", "instantaneous_load_mean", "procs_running_mean", "cpu_busy_pct"} <= set(got["system"])
    assert got["sampler_cpu_s"] >= 0
    with pytest.raises(ValueError, match="interval_s"):
        procstat.ProcSampler({}, interval_s=0)


def test_a_process_that_is_gone_is_unavailable_not_zero():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    got = sample(proc.pid, 0.2)
    assert "unavailable" in got["processes"]["child"]
    assert "cpu_pct" not in got["processes"]["child"]
