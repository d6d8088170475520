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
# more `sluice load rtsp` options (e.g. "--udp-gro on"). LIVE=1 makes it a live row: ffmpeg
# (on CPU 1, copying, in real time, looped) publishes hd.mp4 to /live/hd and the viewers watch
# that live path for 30 s from wherever they join, instead of playing the file from its start.
# LIVE=1 PEER=gst makes it GStreamer's live row: ffmpeg publishes to a sluice on CPU 1 (the source,
# beside the viewers), and GStreamer's RTSP server (scripts/gst-rtsp-server.py --relay) pulls it on
# CPU 0 and fans it out to the viewers; its CPU is read from /proc (it has no /metrics).
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
CONFIG=()
if [ "${LIVE:-0}" = 1 ]; then
  printf '[[access]]\nprefix = "/live/"\nmode = "open"\npublish = true\n' > "$OUT/live.toml"
  CONFIG=(--config "$OUT/live.toml")
fi
# GStreamer's row: the sluice taking the publish is the source, on the viewers' CPU; the relay
# listens on the RTSP port the viewers use.
SERVER_CPU=0; GST_RP=$RP
if [ "${PEER:-sluice}" = gst ]; then SERVER_CPU=1; RP=$((HP + 3)); fi
taskset -c $SERVER_CPU "$BIN" serve "${CONFIG[@]}" --root "$MEDIA" --listen 127.0.0.1:$HP --rtsp-listen 127.0.0.1:$RP \
  --admin-listen 127.0.0.1:$AP --engine "$ENGINE" --workers 1 --log-level "${LOG_LEVEL:-warn}" "$@" > "$OUT/server.log" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf 127.0.0.1:$AP/healthz > /dev/null && break; sleep 0.1; done
URL=rtsp://127.0.0.1:$RP/hd.mp4; PLAY="--expect-samples 900 --duration 50s"
if [ "${LIVE:-0}" = 1 ]; then
  taskset -c 1 ffmpeg -hide_banner -loglevel error -re -stream_loop -1 -i "$MEDIA/hd.mp4" -c copy \
    -f rtsp -rtsp_transport tcp rtsp://127.0.0.1:$RP/live/hd > "$OUT/publisher.log" 2>&1 &
  PUB=$!
  trap 'kill $SP $PUB 2>/dev/null || true' EXIT
  live_ready() { curl -s 127.0.0.1:$AP/streams | python3 -c 'import json, sys
sys.exit(0 if any(e["path"] == "/live/hd" and e["ready"] for e in json.load(sys.stdin)["live"]) else 1)'; }
  for _ in $(seq 100); do live_ready && break; sleep 0.1; done
  URL=rtsp://127.0.0.1:$RP/live/hd; PLAY="--duration 34s"
  if [ "${PEER:-sluice}" = gst ]; then
    taskset -c 0 /usr/bin/python3 "$HERE/gst-rtsp-server.py" --relay "$URL" --name live/hd --port $GST_RP \
      > "$OUT/gst.log" 2>&1 &
    GP=$!
    trap 'kill $SP $PUB $GP 2>/dev/null || true' EXIT
    for _ in $(seq 100); do grep -q '^ready' "$OUT/gst.log" && break; sleep 0.1; done
    URL=rtsp://127.0.0.1:$GST_RP/live/hd
    # The relay's pipeline starts with its first viewer: one look first, so the load measures
    # the fan-out, not the pull's start.
    timeout 10 ffprobe -v error -rtsp_transport tcp -show_entries stream=codec_name "$URL" > "$OUT/probe.txt" 2>&1 || true
    read -r _ _ _ _ _ _ _ _ _ _ _ _ _ GU0 GS0 _ < /proc/$GP/stat
  fi
fi
taskset -c 1 /usr/bin/time -o "$OUT/gen.time" "${GEN:-$BIN}" load rtsp "$URL" --clients "$N" \
  --transport "${TRANSPORT:-udp}" ${LOAD_ARGS:-} --ramp 4s $PLAY --json "$OUT/load.json" > "$OUT/load.txt" 2>&1 || true
curl -s 127.0.0.1:$AP/metrics > "$OUT/metrics"
if [ -n "${GP:-}" ]; then
  # The relay's CPU over the run in seconds (user, system), from clock ticks.
  read -r _ _ _ _ _ _ _ _ _ _ _ _ _ GU1 GS1 _ < /proc/$GP/stat
  HZ=$(getconf CLK_TCK)
  echo "$(( (GU1 - GU0) * 1000 / HZ )) $(( (GS1 - GS0) * 1000 / HZ ))" > "$OUT/peer.cpu_ms"
  kill $GP; wait $GP 2>/dev/null || true
fi
grep -E '^(cpu[01]) ' /proc/stat > "$OUT/stat.after"
snmp > "$OUT/snmp.after"
kill $SP ${PUB:-}; wait $SP 2>/dev/null || true
trap - EXIT
python3 "$HERE/rtsp-fanout-sum.py" "$OUT" | tee "$OUT/summary"
