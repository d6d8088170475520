#!/usr/bin/env python3
"""sluice against nginx with wrk, in one run, alternating: the core issue's benchmark.

Both servers get one worker pinned to one core, wrk gets the other; each round runs every server
once per file size, so drift on the machine hits both alike. Prints a Markdown table for
docs/BENCHMARKS.md with the exact commands. Needs: nginx, wrk (Debian packages), a release build.

    cargo build --release -p sluice
    python3 scripts/bench_vs_nginx.py --duration 10 --rounds 3
"""
import argparse, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"server exited early: {proc.args}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server did not listen on {port}")


def to_ms(value, unit):
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_wrk(cpu, url, conns, duration):
    cmd = ["taskset", "-c", cpu, "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency", url]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    tr = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    mb = float(tr.group(1)) * {"B": 1 / 2**20, "KB": 1 / 1024, "MB": 1, "GB": 1024}[tr.group(2)]
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: (.*)", out)
    return {
        "rps": rps, "mbs": mb, "p50": to_ms(*p50.groups()), "p99": to_ms(*p99.groups()),
        "errors": int(errors.group(1)) if errors else 0, "sockerr": sockerr.group(1) if sockerr else "",
        "cmd": " ".join(cmd),
    }


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
    cores = os.cpu_count() or 1
    server_cpu, load_cpu = ("1", "0") if cores >= 2 else ("0", "0")

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
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
worker_processes 1;
worker_cpu_affinity {1 << int(server_cpu):b};
worker_rlimit_nofile 20000;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    server {{
        listen 127.0.0.1:{nginx_port} reuseport backlog=4096;
        root {lib};
        location / {{ }}
    }}
}}
""")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    servers = {
        "nginx": [nginx_bin, "-p", work, "-c", conf],
        "sluice": ["taskset", "-c", server_cpu, args.sluice, "serve", "--root", lib,
                   "--listen", f"127.0.0.1:{sluice_port}", "--engine", "epoll", "--workers", "1",
                   "--send", "sendfile", "--access-log", "false", "--log-level", "warn"],
    }
    ports = {"nginx": nginx_port, "sluice": sluice_port}
    procs = {}
    try:
        for name, cmd in servers.items():
            procs[name] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True)
            wait_port(ports[name], procs[name])
        results = {}
        for rnd in range(args.rounds):
            for size in args.sizes.split(","):
                for name in servers:
                    url = f"http://127.0.0.1:{ports[name]}/{size}.bin"
                    r = run_wrk(load_cpu, url, args.connections, args.duration)
                    results.setdefault((size, name), []).append(r)
                    print(f"round {rnd + 1} {size} {name}: {r['rps']:.0f} req/s {r['mbs']:.0f} MB/s "
                          f"p99 {r['p99']:.2f} ms errors {r['errors']} {r['sockerr']}", file=sys.stderr)
    finally:
        for p in procs.values():
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)

    kernel = os.uname().release
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    nginx_version = subprocess.run([nginx_bin, "-v"], capture_output=True, text=True).stderr.strip()
    print(f"\nMachine: {cores} cores ({cpu_model}), Linux {kernel}; {nginx_version}; "
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
