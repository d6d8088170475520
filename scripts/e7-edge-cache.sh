#!/usr/bin/env bash
# E7 `edge-cache` by hand (the lab has it now: `sluice lab run edge-cache`; see docs/BENCHMARKS.md): SeaweedFS
# (`weed mini`) on free loopback ports, toxiproxy in front of its S3 API adding a round trip
# (RTT_MS each way), a library of FILES random files of FILE_MB MiB, and three rows:
#   local   `sluice serve --root` over the same files (the reference)
#   s3      an edge over the bucket with a cache that holds the library: a cold pass, then warm
#   s3-half an edge whose cache is half the library (LRU churn), warm pass
# Each warm pass is `sluice load http` for SECONDS_PER_PASS of whole-file GETs, then as long of
# 1 MiB ranges from the files' middles, VUS users; the server is pinned to CPU 1 and the load to CPU 0. Per pass: req/s, MB/s,
# p95, the server's CPU seconds (from its /metrics), MB/s per server CPU-second, origin requests
# per 1,000 client requests, cache hit ratio, RSS. Not measured here: two edges behind HAProxy
# and nginx's caching proxy as the peer (the lab module's rows).
# Usage: scripts/e7-edge-cache.sh [OUT_DIR]   (SLUICE=path/to/sluice, default target/release/sluice)
#   cold-ttfb  cold whole GETs through fresh edges: time to first byte and to the last
#              (e.g. FILES=1 FILE_MB=256 ROWS=cold-ttfb TTFB_BINS="old/sluice new/sluice")
# Every process it starts it stops by pid. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-target/release/sluice}
TOXI=${TOXIPROXY:-$(go env GOPATH)/bin/server}
OUT=${1:-$(mktemp -d /tmp/sluice-e7.XXXXXX)}
FILES=${FILES:-24}
FILE_MB=${FILE_MB:-8}
RTT_MS=${RTT_MS:-10}
SECONDS_PER_PASS=${SECONDS_PER_PASS:-8}
# 1 MiB from the middle of each file (clipped to its end when the file is smaller).
MID=$(((FILE_MB << 20) / 2))
RANGE="Range: bytes=$MID-$((MID + (1 << 20) - 1))"
VUS=${VUS:-16}
ROWS=${ROWS:-local s3 s3-half}   # which rows to run
row_on() { [[ " $ROWS " == *" $1 "* ]]; }
mkdir -p "$OUT"
work=$(mktemp -d)
pids=()
groups=()
# weed runs behind a pyenv shim that does not pass signals on, and shuts down slowly: it gets a
# process group of its own (setsid), killed whole.
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

export AWS_ACCESS_KEY_ID=sluice AWS_SECRET_ACCESS_KEY=sluice-secret AWS_REGION=us-east-1
args=()
for name in master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc s3.port \
    s3.port.grpc webdav.port admin.port admin.port.grpc debug.port; do
  p=$(port); args+=("-$name=$p"); [ "$name" = s3.port ] && S3PORT=$p; [ "$name" = filer.port ] && FILERPORT=$p
done
mkdir -p "$work/weed"
S3_BUCKET=e7-edge setsid weed mini -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.telemetry=false -admin.ui=false -volume.max=50 "${args[@]}" >"$work/weed.log" 2>&1 &
groups+=($!)
for _ in $(seq 300); do
  curl -sf -H 'Accept: application/json' "http://127.0.0.1:$FILERPORT/buckets/e7-edge/" >/dev/null && break; sleep 0.2
done
TOXIPORT=$(port); PROXYPORT=$(port)
"$TOXI" -host 127.0.0.1 -port "$TOXIPORT" >"$work/toxi.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$TOXIPORT/version" >/dev/null && break; sleep 0.1; done
curl -sf -X POST "http://127.0.0.1:$TOXIPORT/proxies" \
  -d "{\"name\":\"s3\",\"listen\":\"127.0.0.1:$PROXYPORT\",\"upstream\":\"127.0.0.1:$S3PORT\"}" >/dev/null
for dir in upstream downstream; do
  curl -sf -X POST "http://127.0.0.1:$TOXIPORT/proxies/s3/toxics" \
    -d "{\"name\":\"lat_$dir\",\"type\":\"latency\",\"stream\":\"$dir\",\"attributes\":{\"latency\":$RTT_MS}}" >/dev/null
done

mkdir -p "$work/lib"
for i in $(seq -w 1 "$FILES"); do head -c $((FILE_MB << 20)) /dev/urandom >"$work/lib/f$i.mp4"; done
"$SLUICE" upload --quiet s3://e7-edge/lib "$work/lib" --s3-endpoint "http://127.0.0.1:$S3PORT" --concurrency 8 >"$work/upload.log" || { cat "$work/upload.log"; exit 1; }
LIB_BYTES=$((FILES * FILE_MB << 20))

serve() { # name args... ; sets HTTP, ADMIN, SERVER_PID
  HTTP=$(port); ADMIN=$(port)
  taskset -c 1 "$SLUICE" serve --listen "127.0.0.1:$HTTP" --admin-listen "127.0.0.1:$ADMIN" --no-rtsp \
    --access-log false --engine epoll --workers 1 "${@:2}" >"$work/$1.log" 2>&1 &
  SERVER_PID=$!; pids+=($SERVER_PID)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ADMIN/healthz" >/dev/null && break; sleep 0.1; done
}
scrape() { curl -sf "http://127.0.0.1:$ADMIN/metrics" >"$1"; }
urls() { for i in $(seq -w 1 "$FILES"); do echo "http://127.0.0.1:$HTTP/f$i.mp4"; done; }
pass() { # row pass-name [load args...] -> one JSON line in $OUT/results.jsonl
  local row=$1 name=$2; shift 2
  scrape "$work/before"
  taskset -c 0 "$SLUICE" load http --vus "$VUS" -d "${SECONDS_PER_PASS}s" --threads 1 --no-progress -q \
    --json "$work/load.json" "$@" $(urls) >/dev/null || true
  scrape "$work/after"
  python3 - "$row" "$name" "$work/before" "$work/after" "$work/load.json" "$LIB_BYTES" >>"$OUT/results.jsonl" <<'PY'
import json, sys
row, name, before, after, load, lib = sys.argv[1:7]
def metrics(path):
    out = {}
    for line in open(path):
        if line.startswith('#') or ' ' not in line: continue
        k, v = line.rsplit(' ', 1); out[k] = float(v)
    return out
b, a = metrics(before), metrics(after)
d = lambda k: a.get(k, 0) - b.get(k, 0)
cpu = d('sluice_process_cpu_seconds_total{mode="user"}') + d('sluice_process_cpu_seconds_total{mode="system"}')
r = json.load(open(load))
reqs = d('sluice_http_requests_total')
hits, misses = d('sluice_cache_hits_total'), d('sluice_cache_misses_total')
out = {
  'row': row, 'pass': name, 'requests': reqs, 'server_cpu_s': round(cpu, 3),
  'origin_requests': d('sluice_origin_requests_total'),
  'origin_per_1000': round(1000 * d('sluice_origin_requests_total') / reqs, 2) if reqs else None,
  'hit_ratio': round(hits / (hits + misses), 4) if hits + misses else None,
  'rss_mib': round(a.get('sluice_process_resident_memory_bytes', 0) / 2**20, 1),
  'cache_held_mib': round(a.get('sluice_cache_bytes{state="held"}', 0) / 2**20, 1),
  'ok': r['requests']['ok'], 'failed': r['requests']['failed'],
  'req_per_s': round(r['ok_per_s'], 1), 'mb_per_s': round(r['bytes_per_s'] / 1e6, 1),
  'p95_ms': round(r['latency']['p95_us'] / 1e3, 2),
  'mb_per_server_cpu_s': round(r['bytes_received'] / 1e6 / cpu, 1) if cpu else None,
  'load': r,
}
print(json.dumps(out))
PY
  tail -1 "$OUT/results.jsonl" | python3 -c '
import json,sys
r=json.loads(sys.stdin.read()); r.pop("load")
print(r["row"], r["pass"], {k:v for k,v in r.items() if k not in ("row","pass")})'
}

: >"$OUT/results.jsonl"
if row_on local; then
echo "== local root"
serve local --root "$work/lib"
pass local whole
pass local range -H "$RANGE"
kill "$SERVER_PID"
fi

if row_on s3; then
echo "== S3 edge, cache holds the library; cold pass: every file once, 8 at a time"
serve s3 --store s3://e7-edge/lib --s3-endpoint "http://127.0.0.1:$PROXYPORT" --cache-dir "$work/cache-s3" \
  --cache-size $((2 * LIB_BYTES))
scrape "$work/before"
start=$(date +%s.%N)
urls | xargs -P 8 -n 1 curl -sf -o /dev/null
end=$(date +%s.%N)
scrape "$work/after"
python3 - "$start" "$end" "$work/before" "$work/after" "$LIB_BYTES" <<'PY' | tee -a "$OUT/cold.txt"
import sys
s, e, b, a, lib = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
m = lambda p: {l.rsplit(' ', 1)[0]: float(l.rsplit(' ', 1)[1]) for l in open(p) if not l.startswith('#') and ' ' in l}
B, A = m(b), m(a)
d = lambda k: A.get(k, 0) - B.get(k, 0)
print(f"cold pass: {lib/2**20:.0f} MiB in {e-s:.2f} s = {lib/2**20/(e-s):.1f} MiB/s; origin requests {d('sluice_origin_requests_total'):.0f}, "
      f"misses {d('sluice_cache_misses_total'):.0f}, coalesced waits {d('sluice_cache_coalesced_waits_total'):.0f}, "
      f"origin time {d('sluice_origin_request_seconds_sum'):.2f} s")
PY
pass s3 whole
pass s3 range -H "$RANGE"
kill "$SERVER_PID"
fi

if row_on s3-half; then
echo "== S3 edge, cache half the library"
serve s3-half --store s3://e7-edge/lib --s3-endpoint "http://127.0.0.1:$PROXYPORT" --cache-dir "$work/cache-half" \
  --cache-size $((LIB_BYTES / 2))
pass s3-half whole
pass s3-half range -H "$RANGE"
kill "$SERVER_PID"
fi
if row_on cold-ttfb; then
# A cold whole GET of each file through a fresh edge (an empty cache every time): the time to
# the first byte and to the last, from curl. TTFB_BINS lists binaries to compare (default
# $SLUICE); they alternate, ROUNDS rounds of each.
echo "== cold whole GETs: time to first byte"
: >"$OUT/cold-ttfb.jsonl"
for round in $(seq "${ROUNDS:-3}"); do
  for bin in ${TTFB_BINS:-$SLUICE}; do
    rm -rf "$work/cache-ttfb"
    SLUICE=$bin serve ttfb --store s3://e7-edge/lib --s3-endpoint "http://127.0.0.1:$PROXYPORT" \
      --cache-dir "$work/cache-ttfb" --cache-size $((2 * LIB_BYTES))
    for url in $(urls); do
      times=$(curl -sf -o /dev/null -w '%{time_starttransfer} %{time_total} %{size_download}' "$url")
      read -r first total size <<<"$times"
      echo "{\"binary\": \"$bin\", \"round\": $round, \"url\": \"$url\", \"bytes\": $size, \"ttfb_s\": $first, \"total_s\": $total}" \
        | tee -a "$OUT/cold-ttfb.jsonl"
    done
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
  done
done
fi
echo "results: $OUT/results.jsonl"
