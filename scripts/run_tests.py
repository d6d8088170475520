#!/usr/bin/env python3
"""Runs the workspace's tests: `cargo test --workspace`, with its test programs in parallel lanes.

Most of sluice's test programs spend their time waiting on the servers, players and stores they
start (ffmpeg, Chromium, SeaweedFS, nginx), so on a 2-core machine two of them run side by side in
about the time of one: the suite took 38 minutes one program at a time, and every test must
already pass on a busy machine (CI shares its cores). The programs that measure CPU or bound a
time (the lab's cgroup rows, overload, admin lock-out, fair sending, the RTSP fan-out counts) run
alone, before the others start. The doc tests run through cargo as before.

Usage: scripts/run_tests.py [--lanes N] [--timeout S]
  --lanes: default 2, or SLUICE_TEST_LANES; 1 runs them in turn.
  --timeout: seconds a program may run (default 900, or SLUICE_TEST_TIMEOUT). A program past it is
    killed with its process group and fails, so a hang shows which program and test it was (the
    output so far is printed, with libtest's "has been running for over 60 seconds" lines) instead
    of using up CI's time with nothing said. The longest program took about 5 minutes alone.
Each program's output is kept and printed whole when it fails; the run stops starting new programs
after a failure and exits 1. A program still running after 5 minutes is named every 5 minutes.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

# Test programs (by target name) that run with nothing beside them: they measure CPU under a quota
# or assert a bound in time that a second program on the same cores could break.
ALONE = [f"sluice/test/{t}" for t in
         ["lab", "overload", "admin_lockout", "fair_sending", "rtsp_fanout", "metrics_bench"]]
# The longest of the rest start first, so the lanes end together (seconds measured one at a time
# on 2 cores; unlisted programs are short and go last).
LONGEST_FIRST = [f"sluice/test/{t}" for t in [
    "robustness", "rtsp", "fragmented", "names", "hls_edge", "uploads", "access", "scaleout",
    "edge_cache", "ktls_vm", "codecs", "integrity", "protect", "codecs_browser", "rtsp_edge", "ops",
    "hls_browser", "https", "clip", "dash", "http", "dashboard",
]]


def test_programs():
    """Builds the tests and returns (name, executable, package directory) for each program."""
    cmd = ["cargo", "test", "--workspace", "--locked", "--no-run", "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout
    programs = []
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("profile", {}).get("test"):
            continue
        exe = msg.get("executable")
        if not exe:
            continue
        target = msg["target"]
        package = os.path.dirname(msg["manifest_path"])
        kind = target["kind"][0]
        programs.append((f"{os.path.basename(package)}/{kind}/{target['name']}", exe, package))
    return programs


class Lanes:
    """Runs programs with at most `lanes` at once; remembers the first failure."""

    def __init__(self, lanes, logdir, timeout):
        self.timeout = timeout
        self.slots = threading.Semaphore(lanes)
        self.logdir = logdir
        self.failed = []
        self.lock = threading.Lock()
        self.threads = []

    def run(self, name, exe, cwd):
        self.slots.acquire()
        if self.failed:
            self.slots.release()
            return
        t = threading.Thread(target=self._one, args=(name, exe, cwd))
        t.start()
        self.threads.append(t)

    def _one(self, name, exe, cwd):
        try:
            log = os.path.join(self.logdir, name.replace(" ", "_").replace("/", "_") + ".log")
            start = time.monotonic()
            with open(log, "w") as f:
                # A session of its own, so a program that outlives its bound goes with every
                # server and client it started.
                # No terminal either: a tool a test runs that reads its stdin (ffmpeg does) gets
                # end of file, never a stop for reading a terminal from the background.
                proc = subprocess.Popen([exe], cwd=cwd, stdin=subprocess.DEVNULL, stdout=f,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                rc, timed_out = self._wait(name, proc, start)
            took = time.monotonic() - start
            with open(log) as f:
                text = f.read()
            if timed_out:
                text += f"\n{name} ran past its bound of {self.timeout:.0f} s and was killed\n"
            summary = [l for l in text.splitlines() if l.startswith("test result:")]
            with self.lock:
                print(f"{'ok  ' if rc == 0 else 'FAIL'} {name:<40} {took:7.1f} s  {summary[-1] if summary else ''}",
                      flush=True)
                if rc != 0:
                    self.failed.append(name)
                    print(f"---- {name}: output ----\n{text}---- end of {name} ----", flush=True)
        finally:
            self.slots.release()

    def _wait(self, name, proc, start):
        """Waits for `proc` up to the bound; returns (exit code, whether it was killed for time)."""
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= self.timeout:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return proc.wait(), True
            try:
                return proc.wait(timeout=min(300 - elapsed % 300, self.timeout - elapsed)), False
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - start
                if elapsed < self.timeout:
                    print(f"     {name:<40} still running after {elapsed:5.0f} s", flush=True)

    def wait(self):
        for t in self.threads:
            t.join()
        self.threads = []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=int(os.environ.get("SLUICE_TEST_LANES", "2")))
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("SLUICE_TEST_TIMEOUT", "900")))
    args = ap.parse_args()
    programs = test_programs()
    by_name = {name: (exe, cwd) for name, exe, cwd in programs}
    alone = [n for n in ALONE if n in by_name]
    order = {n: i for i, n in enumerate(LONGEST_FIRST)}
    rest = sorted((n for n in by_name if n not in alone), key=lambda n: (order.get(n, len(order)), n))
    os.environ.setdefault("CARGO", "cargo")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sluice-tests-") as logdir:
        print(f"{len(programs)} test programs: {len(alone)} alone, then {len(rest)} in {args.lanes} lanes", flush=True)
        solo = Lanes(1, logdir, args.timeout)
        for n in alone:
            solo.run(n, *by_name[n])
            solo.wait()
        lanes = Lanes(max(1, args.lanes), logdir, args.timeout)
        if not solo.failed:
            for n in rest:
                lanes.run(n, *by_name[n])
            lanes.wait()
        failed = solo.failed + lanes.failed
    if not failed:
        # Doc tests: cargo builds and runs them (the programs above did not include them).
        rc = subprocess.run(["cargo", "test", "--workspace", "--locked", "--doc"]).returncode
        if rc != 0:
            failed.append("doc tests")
    took = time.monotonic() - start
    if failed:
        print(f"test programs failed: {', '.join(failed)} ({took:.0f} s)", flush=True)
        return 1
    print(f"all {len(programs)} test programs and the doc tests passed in {took:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
