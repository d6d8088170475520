#!/usr/bin/env python3
"""sluice against nginx with wrk, in one run, alternating: the core issue's benchmark.

Both servers get one worker pinned to one core, wrk gets the other; each round runs every server
once per file size, so drift on the machine hits both alike. Prints a Markdown table for
docs/BENCHMARKS.md with the exact commands. Needs: nginx, wrk (Debian packages), a release build.

    cargo build --release -p sluice
    python3 scripts/bench_vs_nginx.py --duration 10 --rounds 3
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile

from benchlib import ROOT, cpus, free_port, machine, nginx_config, run_wrk, start, stop


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    ap.add_argument("--sizes", default="64k,1m")
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "taskset"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"{tool} is missing: apt-get install nginx-light wrk util-linux")
    server_cpu, load_cpu = cpus()

    work = tempfile.mkdtemp(prefix="sluice-bench-")
    os.chmod(work, 0o755)
    lib = os.path.join(work, "lib")
    os.mkdir(lib)
    sizes = {"64k": 64 * 1024, "1m": 1024 * 1024, "256k": 256 * 1024}
    for name in args.sizes.split(","):
        with open(os.path.join(lib, f"{name}.bin"), "wb") as f:
            f.write(os.urandom(sizes[name]))
    for p in (lib,):
        for f in os.listdir(p):
            os.chmod(os.path.join(p, f), 0o644)
    os.chmod(lib, 0o755)

    nginx_port, sluice_port = free_port(), free_port()
    conf = nginx_config(work, nginx_port, server_cpu, f"        root {lib};\n        location / {{ }}",
                        "    sendfile on;\n    tcp_nopush on;")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    servers = {
        "nginx": [nginx_bin, "-p", work, "-c", conf],
        "sluice": ["taskset", "-c", server_cpu, args.sluice, "serve", "--root", lib,
                   "--listen", f"127.0.0.1:{sluice_port}", "--engine", "epoll", "--workers", "1",
                   "--send", "sendfile", "--access-log", "false", "--log-level", "warn",
                   "--no-admin", "--no-rtsp"],
    }
    ports = {"nginx": nginx_port, "sluice": sluice_port}
    procs = {}
    try:
        for name, cmd in servers.items():
            procs[name] = start(cmd, ports[name])
        results = {}
        for rnd in range(args.rounds):
            for size in args.sizes.split(","):
                for name in servers:
                    url = f"http://127.0.0.1:{ports[name]}/{size}.bin"
                    r = run_wrk(load_cpu, url, args.connections, args.duration)
                    results.setdefault((size, name), []).append(r)
                    print(f"round {rnd + 1} {size} {name}: {r['rps']:.0f} req/s {r['mbs']:.0f} MB/s "
                          f"p99 {r['p99']:.2f} ms errors {r['errors']}", file=sys.stderr)
    finally:
        for p in procs.values():
            stop(p)
        shutil.rmtree(work, ignore_errors=True)

    nginx_version = subprocess.run([nginx_bin, "-v"], capture_output=True, text=True).stderr.strip()
    print(f"\nMachine: {machine()}; {nginx_version}; "
          f"server on CPU {server_cpu}, wrk on CPU {load_cpu}; {args.connections} connections, "
          f"{args.duration} s per run, {args.rounds} alternating rounds, medians shown.\n")
    print("| file | server | req/s | MB/s | p50 ms | p99 ms | errors | req/s sluice/nginx | p99 sluice/nginx |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        med = {n: {k: statistics.median(r[k] for r in results[(size, n)]) for k in ("rps", "mbs", "p50", "p99")}
               for n in servers}
        for n in servers:
            m = med[n]
            errs = sum(r["errors"] for r in results[(size, n)])
            ratio = (f"{med['sluice']['rps'] / med['nginx']['rps']:.2f}" if n == "sluice" else "")
            pratio = (f"{med['sluice']['p99'] / med['nginx']['p99']:.2f}" if n == "sluice" else "")
            print(f"| {size} | {n} | {m['rps']:.0f} | {m['mbs']:.0f} | {m['p50']:.2f} | {m['p99']:.2f} | {errs} | {ratio} | {pratio} |")
    print("\nCommands:")
    for name, cmd in servers.items():
        print(f"- {name}: `{' '.join(cmd)}`")
    print(f"- load: `{results[(args.sizes.split(',')[0], 'sluice')][0]['cmd']}` (URL per server and size)")


if __name__ == "__main__":
    main()
