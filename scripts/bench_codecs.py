"""HLS segments served per CPU-second of the server, by what is packaged: an H.264, an HEVC and
an AV1 title of the same picture, length and bit rate over sluice's fMP4 HLS, and the H.264 and
HEVC titles over sluice's MPEG-TS HLS (segments muxed in user space) against their fMP4 HLS.

The titles: 1280x720 30 fps test pattern, --clip seconds, video at 3 Mb/s (`-b:v 3M -maxrate 3M
-bufsize 6M`; SVT-AV1 1.4 refuses a maxrate equal to the target, so AV1 is `-b:v 3M` VBR), a
keyframe every 2 s, closed GOPs, AAC 128 kb/s, `+faststart`; libx264, libx265 and libsvtav1 (or
libaom-av1, --av1-encoder) from Debian's ffmpeg. The script prints each file's measured video
bit rate.

The forms, each a list of URLs that wrk cycles through (a Lua script), as a player would fetch:
- `h264`, `hevc`, `av1`: `FILE.mp4/master.m3u8`, every media playlist it names (the video
  variant and the audio group; not the I-frame playlist), every media segment of those
  (per-track CMAF: video and audio segments);
- `h264-muxed`, `hevc-muxed`: `FILE.mp4/media.m3u8`'s segments (one fMP4 segment carries video
  and audio), the like-for-like peer of TS;
- `h264-ts`, `hevc-ts`: `FILE.mp4/ts/master.m3u8`, its media playlist, its segments (`seg-N.ts`,
  video and audio muxed into 188-byte packets in memory).
Before measuring, every playlist, init segment and media segment must answer 200 with a body
(the script stops otherwise), and each segment's structure is printed, the server's work per
segment: for fMP4 a `moof` with a `trun` for each run of samples lying back to back in the file
(a file range: sent by sendfile, or read and gathered into one send when at most 16 KiB), for
TS the packets every sample is cut into.

One sluice (epoll, one worker, sendfile, access log off), pinned to the server's core in a CPU
cgroup of its own with a quota (--cpu cores, period 10 ms), the machinery of bench_hls.py; wrk
on the other core; forms alternate round by round (reversed every other round). Server CPU is
the server's utime + stime from /proc over each run; segments/CPU-s and MB/CPU-s (MB = 10^6
bytes, wrk's bytes read) are medians with min–max spreads; a run with any non-2xx answer or
socket error (wrk's timeout 10 s) stops the script. System calls per segment come from
the server's /metrics (the admin listener, scraped outside the CPU window). "Other CPU" is what
everything but the server and wrk used on the machine during the run (/proc/stat): a figure
well above zero means the machine was busy. Needs wrk, ffmpeg, taskset, a release build, root
(cgroup v1 cpu controller).

    python3 scripts/bench_codecs.py --duration 10 --rounds 3 --cpu 0.5
    python3 scripts/bench_codecs.py --clip 12 --duration 2 --rounds 1 --clips clips   # smoke
"""
import argparse, os, re, resource, shutil, statistics, struct, subprocess, sys, tempfile, urllib.error, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpus, free_port, machine, scrape, start, syscalls, to_ms
from bench_hls import cpu_seconds, ffmpeg, in_cgroup, make_cgroup, stop_all, throttling

CODECS = ("h264", "hevc", "av1")
FORMS = ("h264", "hevc", "av1", "h264-muxed", "h264-ts", "hevc-muxed", "hevc-ts")


def encode(path, codec, clip, av1_encoder):
    """One title: the same picture, sound, length, GOP and bit rate for every codec."""
    rate = ["-b:v", "3M", "-maxrate", "3M", "-bufsize", "6M"]
    video = {
        "h264": ["-c:v", "libx264", "-preset", "veryfast", "-sc_threshold", "0", *rate],
        "hevc": ["-c:v", "libx265", "-preset", "veryfast", "-tag:v", "hvc1",
                 "-x265-params", "scenecut=0:open-gop=0:log-level=error", *rate],
        # SVT-AV1 1.4 wants maxrate above the target and has no CBR with random access: VBR at 3M.
        "av1": (["-c:v", "libsvtav1", "-preset", "10", "-svtav1-params", "scd=0:rc=1", "-b:v", "3M"]
                if av1_encoder == "libsvtav1" else
                # libaom is CBR when minrate = maxrate = the target.
                ["-c:v", "libaom-av1", "-cpu-used", "8", "-row-mt", "1", "-minrate", "3M", *rate]),
    }[codec]
    ffmpeg("-f", "lavfi", "-i", f"testsrc2=size=1280x720:rate=30:duration={clip}", "-f", "lavfi",
           "-i", f"sine=frequency=440:sample_rate=48000:duration={clip}", *video, "-g", "60", "-keyint_min", "60",
           "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k", "-movflags", "+faststart", path)


def video_bit_rate(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "stream=bit_rate",
                          "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout.strip()
    return int(out) / 1e6


def fetch(base, path):
    """The body of `path`; stops the script unless it is a 200 with a body."""
    try:
        with urllib.request.urlopen(base + path, timeout=30) as r:
            body = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        sys.exit(f"GET {path}: {e.code}")
    if status != 200 or not body:
        sys.exit(f"GET {path}: status {status}, {len(body)} bytes")
    return body


def playlist_uris(base, path):
    """The URIs (made absolute) a playlist names: its lines and its URI="..." attributes."""
    folder = path.rsplit("/", 1)[0] + "/"
    text = fetch(base, path).decode()
    uris = []
    for line in text.splitlines():
        if line.startswith("#"):
            if line.startswith("#EXT-X-I-FRAME-STREAM-INF"):
                continue  # trick play: not what a player fetches to play
            if 'URI="' in line:
                uris.append(folder + line.split('URI="', 1)[1].split('"', 1)[0])
        elif line.strip():
            uris.append(folder + line.strip())
    return uris


def media_segments(base, master):
    """(segment paths, every other path fetched to reach them) from a master or media playlist."""
    segments, others, pending = [], [master], [master]
    while pending:
        for uri in playlist_uris(base, pending.pop(0)):
            if uri.endswith(".m3u8"):
                others.append(uri)
                pending.append(uri)
            elif uri.endswith("init.mp4"):
                others.append(uri)
            elif uri not in segments:
                segments.append(uri)
    return segments, others


def boxes(data, start=0, end=None):
    """(type, payload start, box end) of each ISO BMFF box in data[start:end]."""
    end = len(data) if end is None else end
    while start + 8 <= end:
        size, kind = struct.unpack(">I4s", data[start:start + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[start + 8:start + 16])[0], 16
        elif size == 0:
            size = end - start
        yield kind.decode("latin-1"), start + header, start + size
        start += size


def trun_bytes(body, payload):
    """(sample count, sample bytes) of the trun whose payload starts at `payload`."""
    flags, count = struct.unpack(">II", body[payload:payload + 8])
    flags &= 0xFFFFFF
    at = payload + 8 + (4 if flags & 0x1 else 0) + (4 if flags & 0x4 else 0)
    per_sample = 4 * sum(1 for bit in (0x100, 0x200, 0x400, 0x800) if flags & bit)
    if not flags & 0x200:
        return count, None
    size_at = 4 if flags & 0x100 else 0
    return count, sum(struct.unpack(">I", body[at + i * per_sample + size_at:at + i * per_sample + size_at + 4])[0]
                      for i in range(count))


def structure(body):
    """What the server made of one segment: for fMP4 the moof's size, its truns (one for each run
    of samples lying back to back in the file), their sample count, and how many truns and bytes
    are in runs of at most 16 KiB (the engine's SMALL_SLICE: such file slices are read and
    gathered into one send, larger ones go by sendfile); for TS the packet count."""
    if body[:1] == b"\x47":
        return {"ts_packets": len(body) // 188}
    s = {"moof": 0, "truns": 0, "samples": 0, "small_truns": 0, "small_bytes": 0, "sample_bytes": 0}
    for kind, payload, end in boxes(body):
        if kind != "moof":
            continue
        s["moof"] += end - payload + 8
        for tk, tp, te in boxes(body, payload, end):
            for rk, rp, _ in (boxes(body, tp, te) if tk == "traf" else ()):
                if rk != "trun":
                    continue
                count, size = trun_bytes(body, rp)
                s["truns"] += 1
                s["samples"] += count
                s["sample_bytes"] += size or 0
                if size is not None and size <= 16 * 1024:
                    s["small_truns"] += 1
                    s["small_bytes"] += size
    return s


def run_wrk(cpu, base, paths, conns, duration, work):
    """wrk on `cpu` cycling through `paths` (bench_hls.py's Lua script), with the socket errors
    (timeouts, resets) counted as well as non-2xx answers: a timed-out request must fail the run,
    not shrink it silently."""
    script = os.path.join(work, "segments.lua")
    with open(script, "w") as f:
        f.write("local paths = {" + ",".join(f'"{p}"' for p in paths) + "}\nlocal i = 0\n"
                "request = function()\n  i = i % #paths + 1\n  return wrk.format('GET', paths[i])\nend\n")
    cmd = ["taskset", "-c", cpu, "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--timeout", "10s", "--latency",
           "-s", script, base]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    read = re.search(r"requests in [\d.]+\w+, ([\d.]+)(\w+) read", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "requests": int(re.search(r"(\d+) requests in", out).group(1)),
            "bytes": float(read.group(1)) * {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}[read.group(2)],
            "errors": (int(non_2xx.group(1)) if non_2xx else 0) + (sum(map(int, sockets.groups())) if sockets else 0),
            "p99_ms": to_ms(*p99.groups()), "cmd": " ".join(cmd)}


def busy_jiffies():
    """Ticks the machine spent working: user, nice, system, irq, softirq (not idle, iowait,
    steal; guest is already in user)."""
    user, nice, system, _idle, _iowait, irq, softirq = map(int, open("/proc/stat").readline().split()[1:8])
    return user + nice + system + irq + softirq


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def med(values, fmt):
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="seconds of wrk per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--cpu", type=float, default=0.5, help="the server's CPU budget, cores")
    ap.add_argument("--clip", type=int, default=60, help="seconds of media in each title")
    ap.add_argument("--segment", type=int, default=6, help="sluice's --hls-segment, seconds")
    ap.add_argument("--forms", default=",".join(FORMS), help="which of " + ", ".join(FORMS))
    ap.add_argument("--av1-encoder", default="libsvtav1", choices=["libsvtav1", "libaom-av1"])
    ap.add_argument("--clips", help="a folder to keep the encoded titles in and reuse them from")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target/release/sluice"))
    args = ap.parse_args()
    forms = args.forms.split(",")
    if unknown := set(forms) - set(FORMS):
        sys.exit(f"unknown forms: {', '.join(sorted(unknown))}")
    for tool in ["wrk", "taskset", "ffmpeg", "ffprobe"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: apt-get install wrk util-linux ffmpeg")
    if not os.access(args.sluice, os.X_OK):
        sys.exit(f"no sluice at {args.sluice}: cargo build --release -p sluice")
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1's banner and notices: errors only
    work = tempfile.mkdtemp(prefix="sluice-codec-bench-")
    try:
        run(args, forms, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, forms, work):
    server_cpu, load_cpu = cpus()
    lib = args.clips or os.path.join(work, "lib")
    os.makedirs(lib, exist_ok=True)
    codecs = [c for c in CODECS if any(f == c or f.startswith(c + "-") for f in forms)]
    rates = {}
    for codec in codecs:
        path = os.path.join(lib, f"{codec}.mp4")
        if not os.path.exists(path):
            print(f"encoding {codec} ({args.clip} s)", file=sys.stderr, flush=True)
            encode(path + ".part.mp4", codec, args.clip, args.av1_encoder)
            os.rename(path + ".part.mp4", path)
        rates[codec] = video_bit_rate(path)
    masters = {"h264": "/h264.mp4/master.m3u8", "hevc": "/hevc.mp4/master.m3u8", "av1": "/av1.mp4/master.m3u8",
               "h264-muxed": "/h264.mp4/media.m3u8", "h264-ts": "/h264.mp4/ts/master.m3u8",
               "hevc-muxed": "/hevc.mp4/media.m3u8", "hevc-ts": "/hevc.mp4/ts/master.m3u8"}

    port, admin = free_port(), free_port()
    groups = {"sluice": make_cgroup(f"sluice-codec-bench-{os.getpid()}", args.cpu)}
    procs = {}
    results = {f: [] for f in forms}
    try:
        procs["sluice"] = start(in_cgroup(groups["sluice"], [
            "taskset", "-c", server_cpu, args.sluice, "serve", "--root", lib, "--engine", "epoll", "--workers", "1",
            "--send", "sendfile", "--hls-segment", f"{args.segment}s", "--access-log", "false", "--log-level", "warn",
            "--no-rtsp", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}"]), port)
        pid = procs["sluice"].pid
        base = f"http://127.0.0.1:{port}"
        paths, shapes = {}, {}
        for form in forms:
            segments, others = media_segments(base, masters[form])
            if not segments:
                sys.exit(f"{form}: {masters[form]} leads to no segments")
            for other in others:
                fetch(base, other)
            # Every segment once, checked, before the rounds: the file's index is warm for all.
            shapes[form] = [(len(b), structure(b)) for b in (fetch(base, p) for p in segments)]
            paths[form] = segments
        for rnd in range(args.rounds):
            for form in forms if rnd % 2 == 0 else list(reversed(forms)):
                calls_before = syscalls(scrape(admin))
                throttle_before = throttling(groups["sluice"])
                busy_before, wrk_before, cpu_before = busy_jiffies(), children_cpu(), cpu_seconds(pid)
                r = run_wrk(load_cpu, base, paths[form], args.connections, args.duration, work)
                cpu = cpu_seconds(pid) - cpu_before
                wrk_cpu = children_cpu() - wrk_before
                other = (busy_jiffies() - busy_before) / os.sysconf("SC_CLK_TCK") - cpu - wrk_cpu
                periods, throttled, _ = (b - a for a, b in zip(throttle_before, throttling(groups["sluice"])))
                calls_after = syscalls(scrape(admin))
                if r["errors"]:
                    sys.exit(f"{form}: {r['errors']} failed requests (non-2xx or socket errors) in round {rnd + 1}")
                mb = r["bytes"] / 1e6
                r.update(cpu=cpu, other=max(other, 0.0), segs_per_cpu=r["requests"] / cpu, mb_per_cpu=mb / cpu,
                         budget=cpu / (args.duration * args.cpu), throttled=throttled / max(periods, 1),
                         by_kind={k: (calls_after[k] - calls_before.get(k, 0)) / r["requests"] for k in calls_after},
                         load=os.getloadavg()[0])
                r["syscalls"] = sum(r["by_kind"].values())
                results[form].append(r)
                print(f"round {rnd + 1} {form}: {r['rps']:.1f} segments/s, server CPU {cpu:.2f} s "
                      f"({r['budget'] * 100:.0f}% of budget, {r['throttled'] * 100:.0f}% of periods throttled) = "
                      f"{r['segs_per_cpu']:.0f} segments/CPU-s, {r['mb_per_cpu']:.0f} MB/CPU-s, p99 {r['p99_ms']:.0f} ms; "
                      f"{r['syscalls']:.1f} syscalls/segment ("
                      + ", ".join(f"{k} {v:.1f}" for k, v in r["by_kind"].items() if v >= 0.05)
                      + f"); other CPU {r['other']:.2f} s, load {r['load']:.2f}",
                      file=sys.stderr, flush=True)
    finally:
        stop_all(procs, groups)
    report(args, forms, rates, paths, shapes, results, server_cpu, load_cpu)


def report(args, forms, rates, paths, shapes, results, server_cpu, load_cpu):
    version = subprocess.run([args.sluice, "--version"], capture_output=True, text=True).stdout.strip()
    ffmpeg_version = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split("\n")[0]
    print(f"\nMachine: {machine()}; {version}; {ffmpeg_version.split(' Copyright')[0]}; server budget {args.cpu} "
          f"core on CPU {server_cpu} (cgroup quota), wrk on CPU {load_cpu}, {args.connections} connections, "
          f"{args.rounds} alternating rounds of {args.duration} s.")
    print(f"Titles: {args.clip} s 1280x720 30 fps, keyframe every 2 s, AAC 128 kb/s, {args.segment} s segments; "
          "measured video bit rate " + ", ".join(f"{c} {r:.2f} Mb/s" for c, r in rates.items())
          + (f" (AV1 by {args.av1_encoder})" if "av1" in rates else "") + ".")
    others = [r["other"] for rs in results.values() for r in rs]
    loads = [r["load"] for rs in results.values() for r in rs]
    print(f"Other work on the machine during the runs: {min(others):.2f}–{max(others):.2f} CPU-s a run "
          f"(1-minute load at the runs' ends {min(loads):.2f}–{max(loads):.2f}, this benchmark's own included).\n")

    print("What the server makes per segment (mean over the stream's segments):\n")
    print("| form | segment | count | bytes | moof bytes | samples | truns | truns ≤ 16 KiB | their share of the "
          "bytes | TS packets |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for form in forms:
        kinds = {}
        for path, shape in zip(paths[form], shapes[form]):
            kinds.setdefault(path.rsplit("/", 1)[1].split("seg-")[0] + "seg-N", []).append(shape)
        for kind, group in kinds.items():
            mean = lambda k: statistics.mean(s.get(k, 0) for _, s in group)
            ts = "ts_packets" in group[0][1]
            print(f"| {form} | {kind} | {len(group)} | {statistics.mean(n for n, _ in group) / 1e3:.0f} kB | "
                  + ("– | – | – | – | – | " if ts else
                     f"{mean('moof'):.0f} | {mean('samples'):.1f} | {mean('truns'):.1f} | {mean('small_truns'):.1f} | "
                     f"{sum(s['small_bytes'] for _, s in group) / max(sum(s['sample_bytes'] for _, s in group), 1) * 100:.0f}% | ")
                  + (f"{mean('ts_packets'):.0f} |" if ts else "– |"))

    print("\n| form | segments/CPU-s median (min–max) | MB/CPU-s median (min–max) | segments/s | server CPU, share "
          "of budget | syscalls/segment | vs h264 segments/CPU-s | vs h264 MB/CPU-s |")
    print("|---|---|---|---|---|---|---|---|")
    medians = {}
    for form in forms:
        rs = results[form]
        col = lambda k: [r[k] for r in rs]
        medians[form] = (statistics.median(col("segs_per_cpu")), statistics.median(col("mb_per_cpu")))
        ref = medians.get("h264")
        vs = (f"{medians[form][0] / ref[0]:.2f}× | {medians[form][1] / ref[1]:.2f}×" if ref else "– | –")
        print(f"| {form} | {med(col('segs_per_cpu'), '.0f')} | {med(col('mb_per_cpu'), '.0f')} | "
              f"{statistics.median(col('rps')):.0f} | {statistics.median(col('budget')) * 100:.0f}% | "
              f"{statistics.median(col('syscalls')):.1f} | {vs} |")
    print("\nSystem calls per segment by kind (median over the runs): " + "; ".join(
        f"{form}: " + ", ".join(f"{k} {statistics.median(r['by_kind'].get(k, 0) for r in results[form]):.1f}"
                                for k in results[form][0]["by_kind"]
                                if statistics.median(r["by_kind"].get(k, 0) for r in results[form]) >= 0.05)
        for form in forms) + ".")
    for a, b in (("h264-ts", "h264-muxed"), ("h264-ts", "h264"), ("hevc-ts", "hevc-muxed"), ("hevc-ts", "h264-ts")):
        if a in medians and b in medians:
            print(f"\n{a} / {b}: segments/CPU-s {medians[a][0] / medians[b][0]:.2f}×, "
                  f"MB/CPU-s {medians[a][1] / medians[b][1]:.2f}×")
    print("\nwrk: " + " ; ".join(f"{f}: {results[f][0]['cmd']}" for f in forms))


if __name__ == "__main__":
    main()
