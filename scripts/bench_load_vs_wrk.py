#!/usr/bin/env python3
"""`sluice load` against wrk, both driving the same nginx, and the generator's memory over a long run.

Cross-check (closed model): nginx serves a 1 KB file from one worker pinned to one core; wrk and
`sluice load http --vus N` take turns on the other core with the same connection count. Reported:
req/s, p50 and p99 from each tool's own histogram, and each tool's CPU time per request (from the
kernel's accounting of the child process) -- when the server is the bottleneck, req/s ties and the
cheaper generator is the one that spends less CPU per request.

Memory (`--memory-minutes M`): an open-model run at a constant rate for M minutes, with the
generator's resident memory sampled every 10 s.

    cargo build --release -p sluice
    python3 scripts/bench_load_vs_wrk.py --duration 10 --rounds 3 --memory-minutes 10
"""
import argparse, json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

from benchlib import ROOT, cpus, free_port, machine, nginx_config, run_wrk, start, stop


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_sluice_load(sluice, cpu, url, conns, duration, out):
    cmd = ["taskset", "-c", cpu, sluice, "load", "http", "--vus", str(conns), "-d", f"{duration}s",
           "--threads", "1", "--no-progress", "-q", "--json", out, url]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rep = json.load(open(out))
    return {"rps": rep["requests_per_s"], "requests": rep["requests"]["ok"],
            "p50": rep["latency"]["p50_us"] / 1000, "p99": rep["latency"]["p99_us"] / 1000,
            "errors": rep["requests"].get("failed", 0), "cmd": " ".join(cmd)}


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--memory-minutes", type=float, default=0)
    ap.add_argument("--memory-rate", type=int, default=2000)
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    args = ap.parse_args()
    server_cpu, load_cpu = cpus()
    work = tempfile.mkdtemp(prefix="sluice-loadcheck-")
    os.chmod(work, 0o755)
    with open(os.path.join(work, "small.txt"), "w") as f:
        f.write("x" * 1024)
    os.chmod(os.path.join(work, "small.txt"), 0o644)
    port = free_port()
    conf = nginx_config(work, port, server_cpu, f"        root {work};\n        location / {{ }}")
    nginx = start([shutil.which("nginx") or "/usr/sbin/nginx", "-p", work, "-c", conf], port)
    url = f"http://127.0.0.1:{port}/small.txt"
    results = {"wrk": [], "sluice load": []}
    try:
        for rnd in range(args.rounds):
            for tool in results:
                cpu0 = child_cpu()
                if tool == "wrk":
                    r = run_wrk(load_cpu, url, args.connections, args.duration)
                else:
                    r = run_sluice_load(args.sluice, load_cpu, url, args.connections, args.duration,
                                        os.path.join(work, "load.json"))
                r["cpu_us_per_req"] = (child_cpu() - cpu0) * 1e6 / max(r["requests"], 1)
                results[tool].append(r)
                print(f"round {rnd + 1} {tool}: {r['rps']:.0f} req/s p50 {r['p50']:.2f} ms p99 {r['p99']:.2f} ms "
                      f"cpu {r['cpu_us_per_req']:.2f} us/req errors {r['errors']}", file=sys.stderr)
        memory = []
        if args.memory_minutes > 0:
            cmd = ["taskset", "-c", load_cpu, args.sluice, "load", "http", "--rate", str(args.memory_rate),
                   "-d", f"{int(args.memory_minutes * 60)}s", "--no-progress", "-q", url]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            began = time.time()
            while proc.poll() is None and time.time() - began < args.memory_minutes * 60 + 60:
                kib = rss_kib(proc.pid)
                if kib is not None:
                    memory.append((round(time.time() - began), kib))
                time.sleep(10)
            if proc.poll() is None:
                stop(proc)
    finally:
        stop(nginx)
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nMachine: {machine()}; nginx on CPU {server_cpu} (1 worker, 1 KB file), generators on CPU "
          f"{load_cpu}; {args.connections} connections, closed model, {args.duration} s per run, "
          f"{args.rounds} alternating rounds, medians shown.\n")
    print("| generator | req/s | p50 ms | p99 ms | generator CPU µs/request | errors |")
    print("|---|---|---|---|---|---|")
    for tool, rs in results.items():
        med = lambda k: statistics.median(r[k] for r in rs)
        print(f"| {tool} | {med('rps'):.0f} | {med('p50'):.3f} | {med('p99'):.3f} | {med('cpu_us_per_req'):.2f} | "
              f"{sum(r['errors'] for r in rs)} |")
    w, s = results["wrk"], results["sluice load"]
    ratio = lambda k: statistics.median(r[k] for r in s) / statistics.median(r[k] for r in w)
    print(f"\nsluice load / wrk: req/s {ratio('rps'):.2f}, p50 {ratio('p50'):.2f}, p99 {ratio('p99'):.2f}, "
          f"CPU per request {ratio('cpu_us_per_req'):.2f}")
    print(f"\nCommands: `{w[0]['cmd']}` and `{s[0]['cmd']}`")
    if memory:
        kib = [m for _, m in memory]
        print(f"\nMemory over a {args.memory_minutes:g}-minute open-model run at {args.memory_rate} req/s "
              f"(`{' '.join(cmd)}`): RSS first sample {kib[0] / 1024:.1f} MiB, last {kib[-1] / 1024:.1f} MiB, "
              f"max {max(kib) / 1024:.1f} MiB over {len(kib)} samples every 10 s.")
        per_minute = [f"{t // 60} min {m / 1024:.1f}" for t, m in memory if t % 60 < 10]
        print("RSS by minute (MiB): " + ", ".join(per_minute))


if __name__ == "__main__":
    main()
