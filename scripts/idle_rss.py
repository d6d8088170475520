#!/usr/bin/env python3
"""Resident memory of `sluice serve` holding N idle keep-alive connections.

Starts sluice (epoll, 1 worker) on a free loopback port, opens N connections that each make one
request and then stay open and idle, and reads VmRSS from /proc before and after. Bounded: N
connections, one request each, then everything is closed and the server stopped by its pid.

    cargo build --release -p sluice
    python3 scripts/idle_rss.py --connections 10000
"""
import argparse, os, resource, selectors, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--engine", default="epoll")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.connections + 100:
        sys.exit(f"open-files hard limit {hard} is below {args.connections}")
    lib = tempfile.mkdtemp(prefix="sluice-rss-")
    with open(os.path.join(lib, "small.txt"), "w") as f:
        f.write("x" * 100)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [args.sluice, "serve", "--root", lib, "--listen", f"127.0.0.1:{port}", "--engine", args.engine,
           "--workers", "1", "--access-log", "false", "--log-level", "warn", "--keepalive-timeout", "300s",
           "--no-admin", "--no-rtsp"]
    server = subprocess.Popen(cmd, start_new_session=True)
    socks = []
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        before = rss_kib(server.pid)
        req = f"GET /small.txt HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        deadline = time.time() + 120
        for i in range(args.connections):
            if time.time() > deadline:
                sys.exit("took too long")
            s = socket.create_connection(("127.0.0.1", port), 5)
            s.sendall(req)
            socks.append(s)
        # Read every response so each connection is idle, between requests, when RSS is read.
        for s in socks:
            got = b""
            while b"\r\n\r\n" not in got or not got.endswith(b"x" * 100):
                chunk = s.recv(4096)
                if not chunk:
                    sys.exit("server closed a connection")
                got += chunk
        time.sleep(1)
        after = rss_kib(server.pid)
        fds = len(os.listdir(f"/proc/{server.pid}/fd"))
        print(f"engine={args.engine} connections={args.connections} open_fds={fds} "
              f"rss_before={before / 1024:.1f} MiB rss_with_idle={after / 1024:.1f} MiB "
              f"per_connection={(after - before) * 1024 / args.connections:.0f} B")
        print(f"command: {' '.join(cmd)}")
    finally:
        for s in socks:
            s.close()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)


if __name__ == "__main__":
    main()
