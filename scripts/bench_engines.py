#!/usr/bin/env python3
"""Every sluice engine against nginx on /bench/hello, with system calls per request.

One worker per server, pinned to one core; wrk on the other. For each connection count, every
configuration runs in turn (alternating, `--rounds` times); system calls per request come from
sluice's own /metrics (scraped before and after each run), so they are the server's, on every
engine. nginx answers `return 200 "Hello, World!"`. Prints a Markdown table for docs/BENCHMARKS.md.

    cargo build --release -p sluice
    python3 scripts/bench_engines.py --duration 10 --rounds 3 --connections 100,1000
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile

from benchlib import ROOT, cpus, free_port, machine, nginx_config, run_wrk, scrape, start, stop, syscalls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", default="100,1000")
    ap.add_argument("--engines", default="uring,epoll,tokio,threads")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    args = ap.parse_args()
    server_cpu, load_cpu = cpus()
    work = tempfile.mkdtemp(prefix="sluice-bench-")
    os.chmod(work, 0o755)
    configs = {}
    for engine in args.engines.split(","):
        port, admin = free_port(), free_port()
        send = "splice" if engine == "uring" else "sendfile"
        configs[engine] = (port, ["taskset", "-c", server_cpu, args.sluice, "serve", "--root", work,
                                  "--listen", f"127.0.0.1:{port}", "--engine", engine, "--workers", "1",
                                  "--send", send, "--access-log", "false", "--log-level", "warn",
                                  "--max-connections", "20000", "--bench", "--no-rtsp",
                                  "--admin-listen", f"127.0.0.1:{admin}"], admin)
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    if os.path.exists(nginx_bin):
        port = free_port()
        block = '        location = /bench/hello { return 200 "Hello, World!"; }'
        conf = nginx_config(work, port, server_cpu, block, "    default_type text/plain;")
        configs["nginx"] = (port, [nginx_bin, "-p", work, "-c", conf], None)
    else:
        print("nginx not installed: its rows are skipped (apt-get install nginx-light)", file=sys.stderr)

    results = {}
    try:
        for conns in map(int, args.connections.split(",")):
            for rnd in range(args.rounds):
                for name, (port, cmd, admin) in configs.items():
                    # A fresh server per run: no state carried between rows.
                    proc = start(cmd, port)
                    try:
                        before = syscalls(scrape(admin)) if admin is not None else None
                        r = run_wrk(load_cpu, f"http://127.0.0.1:{port}/bench/hello", conns, args.duration)
                        if before is not None:
                            after = syscalls(scrape(admin))
                            # The scrapes go to the admin listener: the media engine's counts are
                            # the load's alone.
                            per_kind = {k: (after[k] - before[k]) / max(r["requests"], 1) for k in after}
                            r["syscalls"] = sum(per_kind.values())
                            r["by_kind"] = {k: v for k, v in per_kind.items() if v >= 0.005}
                    finally:
                        stop(proc)
                    results.setdefault((conns, name), []).append(r)
                    print(f"{conns} conns round {rnd + 1} {name}: {r['rps']:.0f} req/s p99 {r['p99']:.2f} ms "
                          f"errors {r['errors']} syscalls/req {r.get('syscalls', float('nan')):.3f}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nMachine: {machine()}; server on CPU {server_cpu}, wrk on CPU {load_cpu} (1 thread); "
          f"{args.duration} s per run, {args.rounds} alternating rounds, medians shown.\n")
    print("| connections | server | req/s | p50 ms | p99 ms | errors | syscalls/request | by kind (per request) | req/s vs epoll |")
    print("|---|---|---|---|---|---|---|---|---|")
    for conns in map(int, args.connections.split(",")):
        epoll = statistics.median(r["rps"] for r in results.get((conns, "epoll"), [{"rps": float("nan")}]))
        for name in configs:
            rs = results[(conns, name)]
            med = lambda k: statistics.median(r[k] for r in rs)
            sc = f"{statistics.median(r['syscalls'] for r in rs):.3f}" if "syscalls" in rs[0] else "n/a"
            kinds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(rs[-1].get("by_kind", {}).items(), key=lambda kv: -kv[1]))
            print(f"| {conns} | {name} | {med('rps'):.0f} | {med('p50'):.2f} | {med('p99'):.2f} | "
                  f"{sum(r['errors'] for r in rs)} | {sc} | {kinds} | {med('rps') / epoll:.2f} |")
    print("\nCommands:")
    for name, (_, cmd, _admin) in configs.items():
        print(f"- {name}: `{' '.join(cmd)}`")
    print(f"- load: `taskset -c {load_cpu} wrk -t1 -cN -d{args.duration}s --latency http://127.0.0.1:PORT/bench/hello`")


if __name__ == "__main__":
    main()
