#!/usr/bin/env python3
"""Live latency of sluice: how long after a picture reaches the server a viewer has it, over RTSP
and over HLS, for docs/BENCHMARKS.md.

    python3 scripts/live_latency.py [--sluice target/release/sluice] [--seconds 30]

This script is the publisher: it sends a 640x360 25 fps H.264 stream (x264 `zerolatency`, a
keyframe a second, encoded ahead by ffmpeg) over RTSP/TCP to /live/lat itself, a picture every
40 ms, and notes when it sent each one. Meanwhile
- an RTSP viewer (this script too, TCP interleaved) notes when each picture's last packet
  arrives; a picture's RTP time, through the PLAY reply's `RTP-Info` and `Range`, is its place on
  the stream's timeline (0 at the publisher's first packet; sluice presents live tracks 0.2 s
  late, which is taken off), which says which picture it is;
- an HLS poller fetches `video.m3u8` every 20 ms and notes when each segment is first listed,
  against when its last picture was sent (its place from `EXT-X-PROGRAM-DATE-TIME` + `EXTINF`
  against the MPD's `availabilityStartTime`): how long after its last picture a segment can be
  fetched. A player that starts three segments from the end (RFC 8216 §6.3.3) is that much plus
  three segments' length behind the publisher.
The encoder's own delay is not included: the "glass" is the publisher's socket.
Prints medians and 95th percentiles, and the machine.
"""
import argparse
import base64
import datetime
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

LEAD = 0.2  # sluice presents live tracks this late (REORDER_TICKS)


def rfc3339(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


def access_units(path):
    """The H.264 access units of an Annex B file: lists of NAL units, each ending at a slice."""
    data = open(path, "rb").read()
    starts = [m.end() for m in re.finditer(b"\x00\x00\x01", data)]
    nals = []
    for i, at in enumerate(starts):
        end = starts[i + 1] - 3 if i + 1 < len(starts) else len(data)
        nals.append(data[at:end].rstrip(b"\x00"))
    units, current = [], []
    for nal in nals:
        current.append(nal)
        if nal[0] & 0x1F in (1, 5):
            units.append(current)
            current = []
    return units


class Rtsp:
    """A minimal RTSP/1.0 client over one TCP connection (requests, then interleaved data)."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port))
        self.buf = b""
        self.cseq = 1

    def request(self, method, target, headers="", body=""):
        extra = f"Content-Length: {len(body)}\r\n" if body else ""
        self.sock.sendall(f"{method} {target} RTSP/1.0\r\nCSeq: {self.cseq}\r\n{headers}{extra}\r\n{body}".encode())
        self.cseq += 1
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        head = head.decode()
        length = int((re.search(r"(?im)^content-length:\s*(\d+)", head) or [0, 0])[1])
        while len(self.buf) < length:
            self.buf += self.sock.recv(65536)
        body, self.buf = self.buf[:length].decode(), self.buf[length:]
        return head, body


def publish(host, port, path, units, sent, stop):
    """Publishes `units` at 25 a second, noting in `sent` when each picture's last packet left."""
    c = Rtsp(host, port)
    url = f"rtsp://{host}:{port}{path}"
    sps = next(n for u in units for n in u if n[0] & 0x1F == 7)
    pps = next(n for u in units for n in u if n[0] & 0x1F == 8)
    sets = ",".join(base64.b64encode(n).decode() for n in (sps, pps))
    sdp = (
        "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=latency\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n"
        f"a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1; sprop-parameter-sets={sets}; "
        f"profile-level-id={sps[1:4].hex()}\r\na=control:streamid=0\r\n"
    )
    c.request("ANNOUNCE", url, "Content-Type: application/sdp\r\n", sdp)
    head, _ = c.request("SETUP", f"{url}/streamid=0", "Transport: RTP/AVP/TCP;unicast;interleaved=0-1;mode=record\r\n")
    session = re.search(r"(?im)^session:\s*([^;\r\n]+)", head)[1]
    c.request("RECORD", url, f"Session: {session}\r\nRange: npt=0.000-\r\n")
    seq, t0 = 0, time.time()
    for i, unit in enumerate(units):
        if stop.is_set():
            break
        time.sleep(max(0.0, t0 + i / 25 - time.time()))
        packets = []
        for n, nal in enumerate(unit):
            last = n == len(unit) - 1
            if len(nal) <= 1400:
                packets.append((nal, last))
                continue
            header, payload = nal[0], nal[1:]
            chunks = [payload[k : k + 1400] for k in range(0, len(payload), 1400)]
            for k, chunk in enumerate(chunks):
                fu = bytes([(header & 0xE0) | 28, (0x80 if k == 0 else 0) | (0x40 if k == len(chunks) - 1 else 0) | (header & 0x1F)])
                packets.append((fu + chunk, last and k == len(chunks) - 1))
        out = b""
        for payload, marker in packets:
            rtp = bytes([0x80, (0x80 if marker else 0) | 96]) + (seq & 0xFFFF).to_bytes(2, "big")
            rtp += ((i * 3600) & 0xFFFFFFFF).to_bytes(4, "big") + (0x5EED).to_bytes(4, "big") + payload
            out += b"$\x00" + len(rtp).to_bytes(2, "big") + rtp
            seq += 1
        c.sock.sendall(out)
        sent.append(time.time())
    c.sock.close()


def rtsp_viewer(host, port, path, sent, seconds, out):
    """Reads the live path over RTSP/TCP; appends (receipt - when it was sent) per picture."""
    c = Rtsp(host, port)
    url = f"rtsp://{host}:{port}{path}"
    _, sdp = c.request("DESCRIBE", url, "Accept: application/sdp\r\n")
    control = re.findall(r"a=control:(\S+)", sdp.split("m=video", 1)[1])[0]
    head, _ = c.request("SETUP", f"{url}/{control}", "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n")
    session = re.search(r"(?im)^session:\s*([^;\r\n]+)", head)[1]
    head, _ = c.request("PLAY", url, f"Session: {session}\r\nRange: npt=0-\r\n")
    start = float(re.search(r"(?im)^range:\s*npt=([\d.]+)", head)[1])
    rtptime = int(re.search(r"rtptime=(\d+)", head)[1])
    end = time.time() + seconds
    buf = c.buf
    while time.time() < end:
        while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[2:4], "big"):
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                return
            buf += chunk
        now = time.time()
        channel, size = buf[1], int.from_bytes(buf[2:4], "big")
        packet, buf = buf[4 : 4 + size], buf[4 + size :]
        if channel == 0 and packet[1] & 0x80:  # video, a picture's last packet
            ts = int.from_bytes(packet[4:8], "big")
            picture = round((start + ((ts - rtptime) & 0xFFFFFFFF) / 90000.0 - LEAD) * 25)
            if 0 <= picture < len(sent):
                out.append(now - sent[picture])
    c.sock.close()


def hls_poller(base, origin, sent, seconds, out):
    seen = set()
    end = time.time() + seconds
    while time.time() < end:
        status, text = get(f"{base}/video.m3u8")
        now = time.time()
        if status == 200:
            pdt = None
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if line.startswith("#EXT-X-PROGRAM-DATE-TIME:"):
                    pdt = rfc3339(line.split(":", 1)[1])
                elif line.startswith("#EXTINF:") and pdt is not None:
                    duration = float(line[8:].split(",")[0])
                    name = lines[i + 1]
                    last = round((pdt - origin + duration) * 25) - 1
                    if name not in seen:
                        seen.add(name)
                        # The first ones were listed before polling began.
                        if len(seen) > 2 and 0 <= last < len(sent):
                            out.append(now - sent[last])
                    pdt += duration
        time.sleep(0.02)


def summary(values):
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    return f"median {statistics.median(values) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms ({len(values)} samples)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=os.path.join(benchlib.ROOT, "target/release/sluice"))
    ap.add_argument("--seconds", type=int, default=30)
    args = ap.parse_args()
    work = f"/tmp/live-latency-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    with open(f"{work}/sluice.toml", "w") as f:
        f.write('[[access]]\nprefix = "/live/"\nmode = "open"\npublish = true\n')
    source = f"{work}/source.h264"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-c:v", "libx264",
         "-tune", "zerolatency", "-x264-params", "sliced-threads=0", "-g", "25", "-t", str(args.seconds + 8),
         "-f", "h264", source],
        check=True,
    )
    units = access_units(source)
    http, rtsp, admin = benchlib.free_port(), benchlib.free_port(), benchlib.free_port()
    server = benchlib.start(
        [args.sluice, "serve", "--config", f"{work}/sluice.toml", "--root", work, "--listen", f"127.0.0.1:{http}",
         "--rtsp-listen", f"127.0.0.1:{rtsp}", "--admin-listen", f"127.0.0.1:{admin}", "--log-level", "warn"],
        http,
    )
    sent, stop = [], threading.Event()
    publisher = threading.Thread(target=publish, args=("127.0.0.1", rtsp, "/live/lat", units, sent, stop))
    publisher.start()
    try:
        base = f"http://127.0.0.1:{http}/live/lat"
        for _ in range(200):
            try:
                if get(f"{base}/video.m3u8")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        _, mpd = get(f"{base}/manifest.mpd")
        origin = rfc3339(re.search(r'availabilityStartTime="([^"]+)"', mpd)[1])
        rtsp_out, hls_out = [], []
        threads = [
            threading.Thread(target=rtsp_viewer, args=("127.0.0.1", rtsp, "/live/lat", sent, args.seconds, rtsp_out)),
            threading.Thread(target=hls_poller, args=(base, origin, sent, args.seconds, hls_out)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"machine: {benchlib.machine()}")
        print(f"RTSP, a picture sent by the publisher to its receipt by a viewer: {summary(rtsp_out)}")
        print(f"HLS, a segment's last picture sent by the publisher to the segment being listed: {summary(hls_out)}")
        print(
            f"HLS, a player starting three segments from the end: about "
            f"{statistics.median(hls_out) + 3 * 2.0:.1f} s behind the publisher"
        )
    finally:
        stop.set()
        publisher.join()
        benchlib.stop(server)


if __name__ == "__main__":
    main()
