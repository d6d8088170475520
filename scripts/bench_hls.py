"""HLS segments packaged on the fly by sluice against the same stream packaged beforehand by ffmpeg
(`-f hls -hls_segment_type fmp4`) and served by nginx as static files, at the same CPU budget;
then the memory the cached segment indexes of a 1,000-file library cost. Issue 17's benchmark.

Both servers: one worker pinned to the server's core, in a CPU cgroup of its own (cgroup v1
`cpu.cfs_quota_us`, period 10 ms) nested in the measurement group, access log off, sendfile.
wrk on the other core cycles through every media segment of the stream (a Lua script), the
servers alternating round by round. Server CPU is the server's processes' utime + stime from
/proc over the run. Needs: nginx, wrk, ffmpeg (Debian packages), a release build.

    python3 scripts/bench_hls.py --duration 10 --rounds 3 --cpu 0.5
"""
import argparse, os, re, shutil, statistics, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpus, free_port, machine, nginx_config, start, stop

CGROUP = "/sys/fs/cgroup/cpu"


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def make_cgroup(name, cpu):
    """A cgroup v1 CPU group at `cpu` cores (period 10 ms) inside the one this script runs in."""
    own = next(l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if re.match(r"\d+:([^:]*,)?cpu(,[^:]*)?:", l))
    path = os.path.join(CGROUP + own, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
        f.write("10000")
    with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(cpu * 10000)))
    return path


def in_cgroup(path, cmd):
    return ["sh", "-c", f'echo $$ > {path}/cgroup.procs && exec "$@"', "sh", *cmd]


def cpu_seconds(pgid):
    """utime + stime of every process in the process group, seconds."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 of stat: the process group
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_wrk(cpu, base, paths, conns, duration, work):
    script = os.path.join(work, "segments.lua")
    with open(script, "w") as f:
        f.write("local paths = {" + ",".join(f'"{p}"' for p in paths) + "}\nlocal i = 0\n"
                "request = function()\n  i = i % #paths + 1\n  return wrk.format('GET', paths[i])\nend\n")
    cmd = ["taskset", "-c", cpu, "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "-s", script, base]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))
    read = re.search(r"requests in [\d.]+\w+, ([\d.]+)(\w+) read", out)
    gb = float(read.group(1)) * {"B": 1 / 2**30, "KB": 1 / 2**20, "MB": 1 / 1024, "GB": 1, "TB": 1024}[read.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "requests": total, "gb": gb,
            "errors": int(errors.group(1)) if errors else 0, "cmd": " ".join(cmd)}


def capacity(args, work, sluice):
    server_cpu, load_cpu = cpus()
    src = os.path.join(work, "lib", "film.mp4")
    os.makedirs(os.path.dirname(src))
    # 60 s of 720p30 H.264 (keyframe every 2 s, about 3 Mb/s) with AAC: a typical VOD rendition.
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=60", "-f", "lavfi",
           "-i", "sine=frequency=440:sample_rate=48000:duration=60", "-c:v", "libx264", "-preset", "veryfast",
           "-b:v", "3M", "-g", "60", "-keyint_min", "60", "-sc_threshold", "0", "-c:a", "aac", "-b:a", "128k",
           "-movflags", "+faststart", src)
    static = os.path.join(work, "static")
    os.makedirs(static)
    ffmpeg("-i", src, "-c", "copy", "-f", "hls", "-hls_time", "6", "-hls_segment_type", "fmp4",
           "-hls_playlist_type", "vod", "-hls_fmp4_init_filename", "init.mp4",
           "-hls_segment_filename", os.path.join(static, "seg-%d.m4s"), os.path.join(static, "media.m3u8"))
    for d in (work, os.path.dirname(src), static):
        os.chmod(d, 0o755)
        for f in os.listdir(d):
            if os.path.isfile(os.path.join(d, f)):
                os.chmod(os.path.join(d, f), 0o644)
    nginx_segments = sorted((f for f in os.listdir(static) if f.endswith(".m4s")), key=lambda f: int(f[4:-4]))

    nginx_port, sluice_port = free_port(), free_port()
    conf = nginx_config(work, nginx_port, server_cpu, f"        root {static};\n        location / {{ }}",
                        "    sendfile on;\n    tcp_nopush on;")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    groups = {name: make_cgroup(f"sluice-hls-bench-{os.getpid()}-{name}", args.cpu) for name in ("nginx", "sluice")}
    servers = {
        "nginx": in_cgroup(groups["nginx"], [nginx_bin, "-p", work, "-c", conf]),
        "sluice": in_cgroup(groups["sluice"], ["taskset", "-c", server_cpu, sluice, "serve", "--root",
                                               os.path.dirname(src), "--listen", f"127.0.0.1:{sluice_port}",
                                               "--engine", "epoll", "--workers", "1", "--send", "sendfile",
                                               "--hls-segment", "6s", "--access-log", "false",
                                               "--log-level", "warn", "--no-admin", "--no-rtsp"]),
    }
    ports = {"nginx": nginx_port, "sluice": sluice_port}
    procs = {}
    results = {}
    try:
        for name, cmd in servers.items():
            procs[name] = start(cmd, ports[name])
        playlist = urllib.request.urlopen(f"http://127.0.0.1:{sluice_port}/film.mp4/media.m3u8").read().decode()
        sluice_segments = [l for l in playlist.splitlines() if l.startswith("seg-")]
        paths = {"nginx": [f"/{s}" for s in nginx_segments], "sluice": [f"/film.mp4/{s}" for s in sluice_segments]}
        sizes = {n: [len(urllib.request.urlopen(f"http://127.0.0.1:{ports[n]}{p}").read()) for p in paths[n]]
                 for n in servers}
        for rnd in range(args.rounds):
            order = list(servers) if rnd % 2 == 0 else list(reversed(servers))
            for name in order:
                before = cpu_seconds(procs[name].pid)
                r = run_wrk(load_cpu, f"http://127.0.0.1:{ports[name]}", paths[name], args.connections,
                            args.duration, work)
                r["cpu"] = cpu_seconds(procs[name].pid) - before
                r["cpu_per_gb"] = r["cpu"] / r["gb"] if r["gb"] else float("nan")
                results.setdefault(name, []).append(r)
                print(f"round {rnd + 1} {name}: {r['rps']:.1f} segments/s {r['gb'] / args.duration * 1024:.0f} MB/s "
                      f"server CPU {r['cpu']:.2f} s = {r['cpu_per_gb']:.3f} s/GB errors {r['errors']}", file=sys.stderr)
    finally:
        for p in procs.values():
            stop(p)
        for g in groups.values():
            try:
                os.rmdir(g)
            except OSError:
                pass
    nginx_version = subprocess.run([nginx_bin, "-v"], capture_output=True, text=True).stderr.strip()
    print(f"\nMachine: {machine()}; {nginx_version}; server budget {args.cpu} core on CPU {server_cpu}, "
          f"wrk on CPU {load_cpu}, {args.connections} connections, {args.rounds} rounds of {args.duration} s.")
    print(f"Stream: 60 s 1280x720 30 fps H.264 3 Mb/s + AAC 128 kb/s; sluice cut {len(sizes['sluice'])} segments "
          f"(mean {statistics.mean(sizes['sluice']) / 1e6:.2f} MB), ffmpeg {len(sizes['nginx'])} "
          f"(mean {statistics.mean(sizes['nginx']) / 1e6:.2f} MB).\n")
    print("| server | segments/s median (min–max) | MB/s median | server CPU s/GB median (min–max) | errors |")
    print("|---|---|---|---|---|")
    med = {}
    for name in ("nginx", "sluice"):
        rs = results[name]
        rps = [r["rps"] for r in rs]
        cpg = [r["cpu_per_gb"] for r in rs]
        mbs = [r["gb"] / args.duration * 1024 for r in rs]
        med[name] = (statistics.median(rps), statistics.median(cpg))
        print(f"| {name} | {statistics.median(rps):.1f} ({min(rps):.1f}–{max(rps):.1f}) | {statistics.median(mbs):.0f} "
              f"| {statistics.median(cpg):.3f} ({min(cpg):.3f}–{max(cpg):.3f}) | {sum(r['errors'] for r in rs)} |")
    print(f"\nsluice / nginx: segments/s {med['sluice'][0] / med['nginx'][0]:.2f}×, "
          f"CPU per GB {med['sluice'][1] / med['nginx'][1]:.2f}×")
    print("\nwrk commands: " + results["sluice"][0]["cmd"] + " ; " + results["nginx"][0]["cmd"])


def rss_kib(pid):
    return int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))


def index_memory(args, work, sluice):
    """RSS growth of a server after indexing `--files` one-hour files (hard links of one file, so
    each is its own cache entry)."""
    lib = os.path.join(work, "hour-lib")
    os.makedirs(lib)
    minute = os.path.join(work, "minute.mp4")
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30:duration=60", "-f", "lavfi",
           "-i", "sine=frequency=440:sample_rate=48000:duration=60", "-c:v", "libx264", "-preset", "ultrafast",
           "-b:v", "100k", "-g", "60", "-c:a", "aac", "-b:a", "32k", minute)
    hour = os.path.join(lib, "f0000.mp4")
    ffmpeg("-stream_loop", "59", "-i", minute, "-c", "copy", "-movflags", "+faststart", hour)
    for i in range(1, args.files):
        os.link(hour, os.path.join(lib, f"f{i:04}.mp4"))
    port = free_port()
    proc = start([sluice, "serve", "--root", lib, "--listen", f"127.0.0.1:{port}", "--engine", "epoll",
                  "--workers", "1", "--hls-segment", "6s", "--access-log", "false", "--log-level", "warn",
                  "--no-admin", "--no-rtsp"], port)
    try:
        def master(i):
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/f{i:04}.mp4/master.m3u8").read()
        master(0)  # allocator warm-up: one file's full tables come and go
        before = rss_kib(proc.pid)
        started = time.time()
        for i in range(args.files):
            master(i)
        took = time.time() - started
        after = rss_kib(proc.pid)
        playlist = urllib.request.urlopen(f"http://127.0.0.1:{port}/f0000.mp4/media.m3u8").read().decode()
        segments = sum(1 for l in playlist.splitlines() if l.startswith("seg-"))
    finally:
        stop(proc)
    print(f"\nIndex memory: {args.files} one-hour files ({os.path.getsize(hour) / 1e6:.0f} MB each, hard links, "
          f"{segments} segments each) indexed in {took:.0f} s; server RSS {before / 1024:.1f} MiB before, "
          f"{after / 1024:.1f} MiB after: {(after - before) / 1024:.1f} MiB for the cached indexes "
          f"({(after - before) * 1024 / args.files / 1024:.1f} KiB a file).")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--cpu", type=float, default=0.5, help="each server's CPU budget, cores")
    ap.add_argument("--files", type=int, default=1000, help="files for the index-memory figure (0: skip)")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "taskset", "ffmpeg"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"{tool} is missing: apt-get install nginx-light wrk util-linux ffmpeg")
    work = tempfile.mkdtemp(prefix="sluice-hls-bench-")
    try:
        capacity(args, work, args.sluice)
        if args.files:
            index_memory(args, work, args.sluice)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
