#!/usr/bin/env bash
# E6 `upload-gzip` by hand (the lab module is not written yet): SeaweedFS (`weed mini`) on free
# loopback ports, toxiproxy in front of its S3 API adding the seed's round trip (55 ms each way),
# `sluice serve` with uploads into that bucket, and `sluice upload` measuring:
#   1. the seed's table: email.html (50 KB) and sms.txt (80 B), plain against gzip, sequential,
#      warm-up 20, runs 100, straight to S3 through the modelled round trip;
#   2. objects/s at concurrency 1, 4, 16, 64: straight to S3 and through `sluice serve`.
# Usage: scripts/e6-upload-gzip.sh [OUT_DIR]   (SLUICE=path/to/sluice, default target/release/sluice)
# Every process it starts it stops by pid. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-target/release/sluice}
KEEP=${KEEP:-}
TOXI=${TOXIPROXY:-$(go env GOPATH)/bin/server}
OUT=${1:-$(mktemp -d /tmp/sluice-e6.XXXXXX)}
RUNS=${RUNS:-100}
WARMUP=${WARMUP:-20}
mkdir -p "$OUT"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

export AWS_ACCESS_KEY_ID=sluice AWS_SECRET_ACCESS_KEY=sluice-secret AWS_REGION=us-east-1
args=()
for name in master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc s3.port \
    s3.port.grpc webdav.port admin.port admin.port.grpc debug.port; do
  p=$(port); args+=("-$name=$p"); [ "$name" = s3.port ] && S3PORT=$p; [ "$name" = filer.port ] && FILERPORT=$p
done
mkdir -p "$work/weed"
S3_BUCKET=e6-uploads weed mini -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.telemetry=false -admin.ui=false "${args[@]}" >"$work/weed.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  curl -sf -H 'Accept: application/json' "http://127.0.0.1:$FILERPORT/buckets/e6-uploads/" >/dev/null && break; sleep 0.2
done
TOXIPORT=$(port); PROXYPORT=$(port)
"$TOXI" -host 127.0.0.1 -port "$TOXIPORT" >"$work/toxi.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$TOXIPORT/version" >/dev/null && break; sleep 0.1; done
curl -sf -X POST "http://127.0.0.1:$TOXIPORT/proxies" \
  -d "{\"name\":\"s3\",\"listen\":\"127.0.0.1:$PROXYPORT\",\"upstream\":\"127.0.0.1:$S3PORT\"}" >/dev/null
rtt() { # on|off
  for dir in upstream downstream; do
    curl -sf -X DELETE "http://127.0.0.1:$TOXIPORT/proxies/s3/toxics/lat_$dir" >/dev/null 2>&1 || true
    [ "$1" = on ] && curl -sf -X POST "http://127.0.0.1:$TOXIPORT/proxies/s3/toxics" \
      -d "{\"name\":\"lat_$dir\",\"type\":\"latency\",\"stream\":\"$dir\",\"attributes\":{\"latency\":55}}" >/dev/null
  done
  return 0
}
S3=http://127.0.0.1:$PROXYPORT
echo "e6-token" > "$work/tokens"
mkdir -p "$work/root"
HTTPPORT=$(port)
# An upload's commit (the PutObject) runs on the CPU job pool and holds a thread for its round
# trip, so the pool is sized for the concurrency measured.
"$SLUICE" serve --root "$work/root" --listen "127.0.0.1:$HTTPPORT" --no-rtsp --access-log false --cpu-workers 64 \
  --upload-token-file "$work/tokens" --store s3://e6-uploads/serve --s3-endpoint "$S3" >"$work/serve.log" 2>&1 &
pids+=($!)
sleep 1

up() { # name args... -> one JSON line in $OUT/results.jsonl
  local name=$1; shift
  "$SLUICE" upload --quiet --json "$work/r.json" "$@" >/dev/null || true
  python3 - "$name" "$work/r.json" >>"$OUT/results.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); r["row"] = sys.argv[1]; print(json.dumps(r))
PY
  python3 - "$name" "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); l = r["latency_ms"]
print(f'{sys.argv[1]:<34} ok {r["objects_ok"]:>5} fail {sum(r["failures"].values()):>3} '
      f'mean {l["mean"]:8.2f} ms p95 {l["p95"]:8.2f} ms {r["objects_per_s"]:8.1f} obj/s '
      f'raw {r["bytes_raw"]:>9} stored {r["bytes_stored"]:>9} conns {r["connections_opened"]}')
PY
}
: >"$OUT/results.jsonl"
for mode in on off; do
  rtt $mode
  echo "== round trip $mode (55 ms each way when on)"
  for payload in email:50KB sms:80 email:100 email:1KB email:10KB; do
    for gz in never auto; do
      "$SLUICE" upload --quiet s3://e6-uploads/warm --endpoint "$S3" --generate "$payload" --count "$WARMUP" --concurrency 1 --gzip $gz >/dev/null || true
      up "rtt-$mode seq $payload gzip=$gz" s3://e6-uploads/seq-$mode-$gz --endpoint "$S3" --generate "$payload" --count "$RUNS" --concurrency 1 --gzip $gz
    done
  done
done
rtt on
echo "== objects/s against concurrency, round trip on, email 50 KB, gzip auto"
for c in 1 4 16 64; do
  n=$((c * 20 > 100 ? c * 20 : 100))
  up "s3 direct c=$c" s3://e6-uploads/conc-$c --endpoint "$S3" --generate email:50KB --count $n --concurrency $c
  up "via sluice serve c=$c" "http://127.0.0.1:$HTTPPORT/conc-$c" --token-file "$work/tokens" --generate email:50KB --count $n --concurrency $c
done
echo "results: $OUT/results.jsonl"
