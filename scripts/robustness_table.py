#!/usr/bin/env python3
"""Runs the robustness suites on every engine and writes docs/ROBUSTNESS.md from what they measured.

The tests decide pass or fail by counts; with --nocapture each also prints the figure it measured
as a `ROBUSTNESS<TAB>test<TAB>engine<TAB>figure` line (tests/common `record_figure`). This script
collects those lines and the pass/fail of every test of the suites into one table per suite:
test x engine. Nothing in the document is typed in by hand.

    scripts/robustness_table.py                 # runs the suites, writes docs/ROBUSTNESS.md
    scripts/robustness_table.py --out FILE      # somewhere else
"""

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
from collections import OrderedDict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The suites whose every test runs on every engine x send strategy.
SUITES = ["integrity", "overload", "robustness", "framing"]
RESULT = re.compile(r"^test (\w+)::(\w+) \.\.\. (ok|FAILED|ignored)")


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Linux {platform.release()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "ROBUSTNESS.md"))
    args = ap.parse_args()
    suites = [s for s in SUITES if os.path.exists(os.path.join(ROOT, "crates", "sluice", "tests", f"{s}.rs"))]
    cmd = ["cargo", "test", "-p", "sluice"]
    for s in suites:
        cmd += ["--test", s]
    cmd += ["--", "--nocapture", "--test-threads", "2"]
    print("running:", " ".join(cmd), file=sys.stderr)
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    output = run.stdout + run.stderr
    figures = OrderedDict()  # test -> {engine: figure}
    engines = []
    for line in output.splitlines():
        if line.startswith("ROBUSTNESS\t"):
            _, test, engine, figure = line.split("\t", 3)
            figures.setdefault(test, {})[engine] = figure
            if engine not in engines:
                engines.append(engine)
    results = OrderedDict()  # test function -> {module: status}
    modules = []
    for line in output.splitlines():
        m = RESULT.match(line)
        if m:
            module, test, status = m.groups()
            results.setdefault(test, {})[module] = status
            if module not in modules:
                modules.append(module)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    today = datetime.date.today().isoformat()
    out = [
        "# Robustness on every engine",
        "",
        f"Measured {today} at {commit} on {machine()}, debug build, by",
        "",
        "```sh",
        "scripts/robustness_table.py   # runs: " + " ".join(cmd),
        "```",
        "",
        "Each test decides by counts (connections cut, requests answered, bytes that match, memory that",
        "stayed put, log lines written); the figures below are what the run measured. Engines are",
        "`engine send` (`threads` rows: pool of 16, or a thread per connection).",
        "",
        "## Measured figures",
        "",
    ]
    for test, by_engine in figures.items():
        out += [f"### {test}", "", "| engine | measured |", "|---|---|"]
        for engine in engines:
            if engine in by_engine:
                out.append(f"| {engine} | {by_engine[engine]} |")
        out.append("")
    out += ["## Every test of the suites", "", "| test | " + " | ".join(modules) + " |",
            "|---|" + "---|" * len(modules)]
    for test, by_module in results.items():
        cells = [by_module.get(m, "") for m in modules]
        out.append(f"| {test} | " + " | ".join(cells) + " |")
    passed = sum(1 for t in results.values() for s in t.values() if s == "ok")
    failed = sum(1 for t in results.values() for s in t.values() if s == "FAILED")
    out += ["", f"{passed} passed, {failed} failed.", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(out))
    print(f"{args.out}: {len(figures)} measured tests, {passed} passed, {failed} failed", file=sys.stderr)
    return 0 if failed == 0 and run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
