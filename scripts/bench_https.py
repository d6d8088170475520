#!/usr/bin/env python3
"""HTTPS against HTTP on 1 MB and 64 KB files: MB per server CPU-second, sluice against nginx with
the same certificate, at the same CPU budget.

Each server (one sluice with HTTP on one port and HTTPS on another, one nginx likewise, both with
the same self-signed ECDSA P-256 certificate made here by openssl) runs one worker pinned to the
server's core in a CPU cgroup of its own (cgroup v1 `cpu.cfs_quota_us`, as scripts/bench_hls.py),
sendfile on. wrk (built with OpenSSL) on the other core fetches one file of each size (--sizes)
over keep-alive connections; the rows (server x scheme x size) alternate round by round. With
kernel TLS offered by the kernel, sluice hands its connections to it (`tls.kernel = "auto"`) and
the run says so; nginx is configured without kernel TLS (no `ssl_conf_command Options KTLS`), so
it stays in user space. Server CPU is
the server's processes' utime + stime from /proc over each run. Needs: nginx, wrk, openssl, a
release build.

    cargo build --release -p sluice
    python3 scripts/bench_https.py --duration 10 --rounds 3 --cpu 0.5
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpus, free_port, machine, nginx_config, run_wrk, start
from bench_hls import cpu_seconds, in_cgroup, make_cgroup, stop_all


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--cpu", type=float, default=0.5, help="server CPU budget, cores")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    ap.add_argument("--sizes", default="1m,64k", help="file sizes, of 1m and 64k")
    args = ap.parse_args()
    sizes = args.sizes.split(",")
    if not sizes or set(sizes) - {"1m", "64k"}:
        sys.exit("--sizes: 1m, 64k or both")
    server_cpu, load_cpu = cpus()
    work = tempfile.mkdtemp(prefix="sluice-https-bench-")
    os.chmod(work, 0o755)
    lib = os.path.join(work, "lib")
    os.mkdir(lib, 0o755)
    for size, length in (("1m", 1 << 20), ("64k", 64 << 10)):
        with open(os.path.join(lib, f"{size}.bin"), "wb") as f:
            f.write(os.urandom(length))
        os.chmod(os.path.join(lib, f"{size}.bin"), 0o644)
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    os.chmod(key, 0o644)
    ports = {(s, p): free_port() for s in ("sluice", "nginx") for p in ("http", "https")}
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    groups = {n: make_cgroup(f"sluice-https-bench-{os.getpid()}-{n}", args.cpu) for n in ("sluice", "nginx")}
    conf = nginx_config(
        work, ports[("nginx", "http")], server_cpu,
        f"        listen 127.0.0.1:{ports[('nginx', 'https')]} ssl reuseport backlog=4096;\n"
        f"        ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
        f"        root {lib};\n        location / {{ }}",
        "    sendfile on;\n    tcp_nopush on;")
    servers = {
        "nginx": in_cgroup(groups["nginx"], [nginx_bin, "-p", work, "-c", conf]),
        "sluice": in_cgroup(groups["sluice"], [
            "taskset", "-c", server_cpu, args.sluice, "serve", "--root", lib,
            "--listen", f"127.0.0.1:{ports[('sluice', 'http')]}",
            "--tls-listen", f"127.0.0.1:{ports[('sluice', 'https')]}", "--tls-cert", cert, "--tls-key", key,
            "--engine", "epoll", "--workers", "1", "--send", "sendfile", "--access-log", "false",
            "--log-level", "warn", "--no-admin", "--no-rtsp"]),
    }
    procs, results = {}, {}
    rows = [(s, p, z) for z in sizes for s in servers for p in ("http", "https")]
    try:
        for name, cmd in servers.items():
            procs[name] = start(cmd, ports[(name, "https")])
        for rnd in range(args.rounds):
            for row in (rows if rnd % 2 == 0 else list(reversed(rows))):
                name, scheme, size = row
                before = cpu_seconds(procs[name].pid)
                r = run_wrk(load_cpu, f"{scheme}://127.0.0.1:{ports[(name, scheme)]}/{size}.bin", args.connections,
                            args.duration)
                r["cpu"] = cpu_seconds(procs[name].pid) - before
                r["mb_per_cpu_s"] = r["mbs"] * args.duration / r["cpu"] if r["cpu"] else float("nan")
                results.setdefault(row, []).append(r)
                print(f"round {rnd + 1} {name} {scheme} {size}: {r['mbs']:.0f} MB/s, server CPU {r['cpu']:.2f} s, "
                      f"{r['mb_per_cpu_s']:.0f} MB per CPU-second, errors {r['errors']}", file=sys.stderr)
    finally:
        stop_all(procs, groups)
        shutil.rmtree(work, ignore_errors=True)
    ktls = open("/proc/sys/net/ipv4/tcp_available_ulp").read().split() if os.path.exists(
        "/proc/sys/net/ipv4/tcp_available_ulp") else []
    nginx_version = subprocess.run([nginx_bin, "-v"], capture_output=True, text=True).stderr.strip()
    print(f"\nMachine: {machine()}; {nginx_version}; kernel TLS {'offered' if 'tls' in ktls else 'not offered'} "
          f"(TCP ULPs: {' '.join(ktls) or 'none'}); server budget {args.cpu} core on CPU {server_cpu}, wrk on CPU "
          f"{load_cpu}; {args.connections} connections, {args.rounds} alternating rounds of {args.duration} s; "
          f"files of {' and '.join(sizes)}; ECDSA P-256 certificate.\n")
    print("| server | scheme | file | MB/s median (min–max) | MB per CPU-second median (min–max) | errors |")
    print("|---|---|---|---|---|---|")
    med = {}
    for row in rows:
        rs = results[row]
        mbs = [r["mbs"] for r in rs]
        eff = [r["mb_per_cpu_s"] for r in rs]
        med[row] = statistics.median(eff)
        print(f"| {row[0]} | {row[1]} | {row[2]} | {statistics.median(mbs):.0f} ({min(mbs):.0f}–{max(mbs):.0f}) | "
              f"{statistics.median(eff):.0f} ({min(eff):.0f}–{max(eff):.0f}) | {sum(r['errors'] for r in rs)} |")
    for z in sizes:
        for s in servers:
            print(f"\n{s}, {z}: HTTPS / HTTP MB per CPU-second {med[(s, 'https', z)] / med[(s, 'http', z)]:.2f}×")
        print(f"\nsluice / nginx over HTTPS, {z}: {med[('sluice', 'https', z)] / med[('nginx', 'https', z)]:.2f}×")
    print("\nCommands:")
    for name, cmd in servers.items():
        print(f"- {name}: `{' '.join(cmd[4:])}`")
    print(f"- load: `{results[('sluice', 'https', sizes[0])][0]['cmd']}` (URL per server, scheme and file)")


if __name__ == "__main__":
    main()
