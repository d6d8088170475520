#!/bin/bash
# One row of docs/BENCHMARKS.md's "RTSP fan-out" section: a sluice server pinned to
# CPU 0 with one worker, `sluice load rtsp` viewers over UDP pinned to CPU 1 (E5's generator
# settings), the server's /metrics, the generator's CPU and the machine's UDP receive-buffer drops
# over the run; prints the row's summary. On a shared machine, run one measurement at a time.
#
#   scripts/rtsp-fanout-row.sh BIN ENGINE CLIENTS TAG [serve flags...]
#   e.g. scripts/rtsp-fanout-row.sh target/release/sluice epoll 300 epoll-300-refuse \
#          --rtsp-overload refuse
#
# MEDIA (default /tmp/fanout-media) holds hd.mp4, E5's content (made here with E5's ffmpeg line
# when missing); RUNS (default /tmp/rtsp-fanout-runs) gets one directory per TAG; LOG_LEVEL (default
# warn) is the server's --log-level, e.g. "warn,sluice::rtsp=debug" for each load window. GEN
# (default BIN) is the viewers' sluice binary, TRANSPORT (default udp) their transport and LOAD_ARGS
# more `sluice load rtsp` options (e.g. "--udp-gro on").
set -eu
BIN=$1; ENGINE=$2; N=$3; TAG=$4; shift 4
HERE=$(cd "$(dirname "$0")" && pwd)
MEDIA=${MEDIA:-/tmp/fanout-media}
OUT=${RUNS:-/tmp/rtsp-fanout-runs}/$TAG
mkdir -p "$MEDIA" "$OUT"
if [ ! -s "$MEDIA/hd.mp4" ]; then
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 \
    -f lavfi -i sine=frequency=440:sample_rate=48000 -t 30 -map 0:v -map 1:a -c:a aac -b:a 128k \
    -c:v libx264 -preset veryfast -b:v 23000k -maxrate 23000k -bufsize 46000k -g 60 -keyint_min 60 \
    -sc_threshold 0 -pix_fmt yuv420p -movflags +faststart -f mp4 "$MEDIA/hd.mp4"
fi
# Below the ephemeral range (32768-60999), where the viewers' own sockets take their ports.
HP=$((10000 + RANDOM % 20000)); RP=$((HP + 1)); AP=$((HP + 2))
snmp() { awk '/^Udp:/{n++; if (n == 2) print "RcvbufErrors=" $6, "InErrors=" $4}' /proc/net/snmp; }
snmp > "$OUT/snmp.before"
grep -E '^(cpu[01]) ' /proc/stat > "$OUT/stat.before"
taskset -c 0 "$BIN" serve --root "$MEDIA" --listen 127.0.0.1:$HP --rtsp-listen 127.0.0.1:$RP \
  --admin-listen 127.0.0.1:$AP --engine "$ENGINE" --workers 1 --log-level "${LOG_LEVEL:-warn}" "$@" > "$OUT/server.log" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf 127.0.0.1:$AP/healthz > /dev/null && break; sleep 0.1; done
taskset -c 1 /usr/bin/time -o "$OUT/gen.time" "${GEN:-$BIN}" load rtsp rtsp://127.0.0.1:$RP/hd.mp4 --clients "$N" \
  --transport "${TRANSPORT:-udp}" ${LOAD_ARGS:-} --ramp 4s --expect-samples 900 --duration 50s --json "$OUT/load.json" > "$OUT/load.txt" 2>&1 || true
curl -s 127.0.0.1:$AP/metrics > "$OUT/metrics"
grep -E '^(cpu[01]) ' /proc/stat > "$OUT/stat.after"
snmp > "$OUT/snmp.after"
kill $SP; wait $SP 2>/dev/null || true
trap - EXIT
python3 "$HERE/rtsp-fanout-sum.py" "$OUT" | tee "$OUT/summary"
