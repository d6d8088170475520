"""Scrubbing-thumbnail generation time per hour of video: how long sluice takes, and how much CPU
it and its ffmpeg children spend, to make every tile of a title the first time it is asked.

The title: --minutes of 1280x720 25 fps test pattern (`testsrc2`), H.264 (libx264 `veryfast`,
2 Mb/s), a keyframe every 2 s, no audio; made once by ffmpeg. For each layout (--intervals: the
thumbnail interval in seconds; 160-pixel cells, the default 5x5 grid), and each round: a fresh
`sluice serve` (epoll, --thumbnail-jobs as given) over a folder holding only the title (tiles
kept by the round before are removed first, so every tile is made), then the image playlist, then
every tile it lists, one request at a time (a scrubbing viewer's order). Measured per round:
wall time from the first tile request to the last answer, the server's own CPU (utime + stime
from /proc) and its children's (cutime + cstime: the ffmpeg runs it waited for), and the
`sluice_thumbnail_decoder_runs_total` counter (must equal the tiles). Printed: medians over
rounds, scaled to one hour of video, with min-max spreads, the machine and its load average.

    python3 scripts/bench_thumbnails.py --minutes 10 --rounds 3 --sluice target/release/sluice
"""
import argparse, os, re, shutil, statistics, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def cpu_of(pid):
    """(own, children) CPU seconds of `pid`."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime) / tick, (cutime + cstime) / tick


def get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        if r.status != 200:
            sys.exit(f"{url}: {r.status}")
        return body


def make_title(path, minutes):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25",
                    "-t", str(minutes * 60), "-c:v", "libx264", "-preset", "veryfast", "-b:v", "2M",
                    "-g", "50", "-keyint_min", "50", "-sc_threshold", "0", "-pix_fmt", "yuv420p", path],
                   check=True)


def one_round(sluice, root, interval, jobs):
    for name in os.listdir(root):
        if name.startswith(".sluice-derived."):
            os.remove(os.path.join(root, name))
    port, admin = benchlib.free_port(), benchlib.free_port()
    proc = benchlib.start([sluice, "serve", "--root", root, "--listen", f"127.0.0.1:{port}",
                           "--admin-listen", f"127.0.0.1:{admin}", "--no-rtsp", "--access-log", "false",
                           "--engine", "epoll", "--workers", "1", "--thumbnail-interval", f"{interval}s",
                           "--thumbnail-jobs", str(jobs)], port)
    try:
        base = f"http://127.0.0.1:{port}/title.mp4/thumbs/"
        tiles = [l for l in get(base + "images.m3u8").decode().splitlines() if l.endswith(".jpg")]
        own0, children0 = cpu_of(proc.pid)
        started = time.monotonic()
        for tile in tiles:
            if not get(base + tile).startswith(b"\xff\xd8"):
                sys.exit(f"{tile}: not a JPEG")
        wall = time.monotonic() - started
        own1, children1 = cpu_of(proc.pid)
        metrics = get(f"http://127.0.0.1:{admin}/metrics").decode()
        runs = int(re.search(r"^sluice_thumbnail_decoder_runs_total (\d+)", metrics, re.M).group(1))
        if runs != len(tiles):
            sys.exit(f"{runs} ffmpeg runs for {len(tiles)} tiles")
        return len(tiles), wall, own1 - own0, children1 - children0
    finally:
        benchlib.stop(proc)


def spread(values, scale):
    values = [v * scale for v in values]
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--intervals", default="10,2", help="thumbnail intervals in seconds, comma-separated")
    p.add_argument("--jobs", type=int, default=1, help="--thumbnail-jobs (1: one ffmpeg at a time)")
    p.add_argument("--sluice", default=os.path.join(benchlib.ROOT, "target/release/sluice"))
    a = p.parse_args()
    if not shutil.which("ffmpeg"):
        sys.exit("ffmpeg is needed")
    work = tempfile.mkdtemp(prefix="bench-thumbs-")
    try:
        title = os.path.join(work, "title.mp4")
        make_title(title, a.minutes)
        print(f"machine: {benchlib.machine()}; load average at start {os.getloadavg()[0]:.2f}")
        print(f"title: {a.minutes} min 1280x720 25 fps H.264, keyframe every 2 s, {os.path.getsize(title) / 1e6:.0f} MB")
        scale = 60 / a.minutes
        print("| interval | tiles (thumbnails) per hour | wall s per hour of video | ffmpeg CPU-s per hour | sluice CPU-s per hour |")
        print("|---|---|---|---|---|")
        for interval in [float(i) for i in a.intervals.split(",")]:
            rows = [one_round(a.sluice, work, interval, a.jobs) for _ in range(a.rounds)]
            tiles = rows[0][0]
            thumbs = int(a.minutes * 60 / interval)
            print(f"| {interval:g} s | {tiles * scale:.0f} ({thumbs * scale:.0f}) | {spread([r[1] for r in rows], scale)} "
                  f"| {spread([r[3] for r in rows], scale)} | {spread([r[2] for r in rows], scale)} |")
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
