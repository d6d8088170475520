"""Shared pieces of the benchmark scripts: ports, processes, wrk, /metrics, the machine.

Every server is started in its own session and stopped by its process group id, never by name.
"""
import os, re, signal, socket, subprocess, sys, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, port, timeout=10, env=None):
    """Starts a server in its own process group (with `env` added to the environment) and waits
    until it accepts on `port`."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, **env} if env else None)
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"server exited early ({proc.returncode}): {' '.join(cmd)}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    stop(proc)
    sys.exit(f"server did not listen on {port}: {' '.join(cmd)}")


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def to_ms(value, unit):
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_wrk(cpu, url, conns, duration, threads=1):
    cmd = ["taskset", "-c", cpu, "wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency", url]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    tr = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    mb = float(tr.group(1)) * {"B": 1 / 2**20, "KB": 1 / 1024, "MB": 1, "GB": 1024}[tr.group(2)]
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "rps": rps, "requests": total, "mbs": mb, "p50": to_ms(*p50.groups()), "p99": to_ms(*p99.groups()),
        "errors": (int(errors.group(1)) if errors else 0) + (sum(map(int, sockerr.groups())) if sockerr else 0),
        "cmd": " ".join(cmd),
    }


def scrape(port):
    """The sluice /metrics samples as a dict (name with labels -> value)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def syscalls(samples):
    return {k[len('sluice_syscalls_total{kind="'):-2]: v for k, v in samples.items() if k.startswith("sluice_syscalls_total")}


def machine():
    cores = os.cpu_count() or 1
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return f"{cores} cores ({model}), Linux {os.uname().release}"


def cpus():
    """(server CPU, load CPU): different cores when there are two."""
    return ("1", "0") if (os.cpu_count() or 1) >= 2 else ("0", "0")


def nginx_config(work, port, server_cpu, server_block, http_extra=""):
    """Writes an nginx.conf for one pinned worker serving `server_block` on `port`; returns its path.

    The same settings for every peer row: one worker on the server's core, access log off, long
    keep-alive, a backlog as deep as sluice's.
    """
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
    keepalive_requests 1000000;
    keepalive_timeout 75s;
{http_extra}
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
{server_block}
    }}
}}
""")
    return conf
