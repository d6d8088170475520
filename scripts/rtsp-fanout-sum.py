"""Summarizes one run directory of scripts/rtsp-fanout-row.sh: the viewers' report (load.json),
the server's /metrics at the end, the generator's CPU (gen.time) and the machine's UDP
receive-buffer drops (snmp.before/after), on one line."""
import json
import os
import sys

d = sys.argv[1]
s = json.load(open(f"{d}/load.json"))["summary"]
m = {}
for line in open(f"{d}/metrics"):
    if line.startswith("#") or not line.strip():
        continue
    k, v = line.rsplit(" ", 1)
    m[k] = float(v)


def rcvbuf(f):
    return int(open(f).read().split()[0].split("=")[1])


drops = rcvbuf(f"{d}/snmp.after") - rcvbuf(f"{d}/snmp.before")
peer = os.path.exists(f"{d}/peer.cpu_ms")
if peer:
    # GStreamer's row: the relay's CPU from /proc; sluice's metrics are the source's.
    u, sy = (int(x) / 1000 for x in open(f"{d}/peer.cpu_ms").read().split())
else:
    u = m['sluice_process_cpu_seconds_total{mode="user"}']
    sy = m['sluice_process_cpu_seconds_total{mode="system"}']
pk = m.get("sluice_rtp_packets_sent_total", 0) or 1
gen = open(f"{d}/gen.time").read().split()
gu, gs = float(gen[0].rstrip("user")), float(gen[1].rstrip("system"))
admitted = s["clients"] if peer else m.get("sluice_rtsp_viewers_admitted_total", 0)
print(
    f"{os.path.basename(d)}: clients={s['clients']} admitted={admitted:.0f} "
    f"refused={m.get('sluice_rtsp_viewers_refused_total', 0):.0f} perfect={s['perfect_clients']} "
    f"all_admitted_perfect={'yes' if s['perfect_clients'] == admitted else 'no'} "
    f"mean={s['samples_mean']:.1f} sd={s['samples_stdev']:.1f} lost={s['lost_packets']} "
    f"dropped_frames={m.get('sluice_rtp_frames_dropped_total', 0):.0f} "
    f"late={m.get('sluice_rtp_late_sends_total', 0):.0f} srv_cpu={u + sy:.1f}s(u{u:.1f}/s{sy:.1f}) "
    + (f"pkts={pk:.0f} us/pkt={(u + sy) / pk * 1e6:.2f} " if not peer else "pkts=- us/pkt=- ")
    # Server CPU seconds per viewer-minute: the viewers that played x the file's half minute.
    + f"cpu_s_per_viewer_min={(u + sy) / max(s['playing_clients'] * 0.5, 1e-9):.3f} "
    f"gen={gu + gs:.1f}s rcvbuf_drops={drops}"
)
