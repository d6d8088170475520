#!/usr/bin/env bash
# Memory of uploads: the server's peak RSS growth for a 1 GiB PUT into a local root and
# into SeaweedFS (multipart), and `sluice upload`'s peak RSS for 10,000 objects at concurrency 64.
# Usage: scripts/upload-memory.sh   (SLUICE=path/to/sluice, default target/release/sluice)
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-target/release/sluice}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
export AWS_ACCESS_KEY_ID=sluice AWS_SECRET_ACCESS_KEY=sluice-secret AWS_REGION=us-east-1
echo tok > "$work/tokens"
truncate -s 1G "$work/big.bin"

args=()
for name in master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc s3.port \
    s3.port.grpc webdav.port admin.port admin.port.grpc debug.port; do
  p=$(port); args+=("-$name=$p"); [ "$name" = s3.port ] && S3PORT=$p; [ "$name" = filer.port ] && FILERPORT=$p
done
mkdir -p "$work/weed"
S3_BUCKET=mem-test weed mini -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.volumeSizeLimitMB=1024 -master.telemetry=false -admin.ui=false "${args[@]}" >"$work/weed.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  curl -sf -H 'Accept: application/json' "http://127.0.0.1:$FILERPORT/buckets/mem-test/" >/dev/null && break; sleep 0.2
done

for store in local s3; do
  mkdir -p "$work/root-$store"
  extra=()
  [ $store = s3 ] && extra=(--store s3://mem-test/m --s3-endpoint "http://127.0.0.1:$S3PORT")
  p=$(port)
  "$SLUICE" serve --root "$work/root-$store" --listen "127.0.0.1:$p" --no-rtsp --access-log false \
    --upload-token-file "$work/tokens" "${extra[@]}" >"$work/serve-$store.log" 2>&1 &
  pid=$!; pids+=($pid)
  sleep 1
  curl -s -o /dev/null -X PUT --data-binary warm -H "Authorization: Bearer tok" "http://127.0.0.1:$p/warm.txt"
  before=$(kib $pid VmRSS)
  code=$(curl -s -o /dev/null -w '%{http_code}' -T "$work/big.bin" -H "Authorization: Bearer tok" "http://127.0.0.1:$p/big.bin")
  peak=$(kib $pid VmHWM)
  echo "1 GiB PUT into $store: HTTP $code, server RSS before ${before} KiB, peak ${peak} KiB, growth $(( (peak - before) / 1024 )) MiB"
  kill $pid
done

p=$(port)
"$SLUICE" serve --root "$work/root-local" --listen "127.0.0.1:$p" --no-rtsp --access-log false \
  --upload-token-file "$work/tokens" >"$work/serve-batch.log" 2>&1 &
pids+=($!)
sleep 1
/usr/bin/time -f "sluice upload 10000 x email:50KB at concurrency 64: peak RSS %M KiB, %e s" \
  "$SLUICE" upload --quiet "http://127.0.0.1:$p/batch" --generate email:50KB --count 10000 --concurrency 64 \
  --token-file "$work/tokens" | head -3
