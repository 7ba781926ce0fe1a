#!/usr/bin/env bash
# CI smoke test of the benchmark tool: starts a Tafel (release build, fresh temp data dir,
# a free port) and runs `tafel-bench --smoke --verify` against it, for each entity shape
# (--shape typed, strings): every workload for ~1 s on a 2000-entity data set, with
# read-back verification of every property; then --slow-log, which must log every
# operation when --slow-ms is 0.
# Builds nothing: expects target/release/tafel and target/release/tafel-bench
# (cargo build --release -p tafel -p tafel-bench). Exits non-zero on any failure.
#
# Env: TAFEL_BIN, TAFEL_BENCH_BIN override the binaries.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAFEL_BIN="${TAFEL_BIN:-$ROOT/target/release/tafel}"
BENCH_BIN="${TAFEL_BENCH_BIN:-$ROOT/target/release/tafel-bench}"
for b in "$TAFEL_BIN" "$BENCH_BIN"; do
  if [ ! -x "$b" ]; then
    echo "bench_smoke: $b not found (cargo build --release -p tafel -p tafel-bench)" >&2
    exit 2
  fi
done

WORK="$(mktemp -d)"
PID=""
cleanup() {
  if [ -n "$PID" ]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Port 0: the kernel picks a free port; Tafel logs the address it listens on.
"$TAFEL_BIN" serve --host 127.0.0.1 --port 0 --data-dir "$WORK/data" --log info --no-admin >"$WORK/tafel.log" 2>&1 &
PID=$!
ADDR=""
for _ in $(seq 1 200); do
  ADDR="$(grep -o 'listening on [0-9.]*:[0-9]*' "$WORK/tafel.log" | head -n1 | awk '{print $3}' || true)"
  [ -n "$ADDR" ] && break
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "bench_smoke: tafel exited early:" >&2
    cat "$WORK/tafel.log" >&2
    exit 1
  fi
  sleep 0.05
done
if [ -z "$ADDR" ]; then
  echo "bench_smoke: tafel did not start listening within 10 s:" >&2
  cat "$WORK/tafel.log" >&2
  exit 1
fi

# Both entity shapes, each verified property by property.
for shape in typed strings; do
  rc=0
  timeout 300 "$BENCH_BIN" --endpoint "http://$ADDR/devstoreaccount1" --smoke --verify --name Tafel \
    --shape "$shape" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "bench_smoke: FAILED (tafel-bench --shape $shape exit $rc); server log tail:" >&2
    tail -n 20 "$WORK/tafel.log" >&2
    exit 1
  fi
done
# --slow-log with --slow-ms 0: every operation of the run is logged, so each workload's lines
# are its operations, one each, in wall-clock time.
rc=0
timeout 120 "$BENCH_BIN" --endpoint "http://$ADDR/devstoreaccount1" --smoke --json \
  --workloads insert,point-read --slow-log "$WORK/slow.tsv" --slow-ms 0 >"$WORK/slow.json" 2>/dev/null || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "bench_smoke: FAILED (tafel-bench --slow-log exit $rc)" >&2
  exit 1
fi
python3 - "$WORK/slow.json" "$WORK/slow.tsv" <<'PY'
import collections, json, sys, time
results = {r["workload"]: r["ops"] for r in json.load(open(sys.argv[1]))["results"]}
lines = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])]
count = collections.Counter(w for w, _, _ in lines)
for w in ("insert", "point-read"):
    assert results[w] > 0 and count[w] == results[w], f"--slow-log: {count[w]} {w} lines for {results[w]} operations"
now = time.time()
assert all(now - 600 < float(t) <= now and float(ms) > 0 for _, t, ms in lines), "--slow-log: times or latencies out of range"
PY
echo "bench_smoke: OK"
