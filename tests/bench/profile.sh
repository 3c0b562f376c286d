#!/usr/bin/env bash
# Profile Gatehouse's chat path under load: the compare mock and oha on core 0, a production build of
# Gatehouse with symbols and named guest functions (own target dir) on core 1 with the benchmark's default pipeline, and
# `perf record` on the Gatehouse process during an `oha -c 64` run. Prints perf's report (children
# and self, per thread), then every sample in one exclusive bucket (tests/bench/perf_buckets.py).
# Method and findings: docs/benchmarks.md#where-the-time-goes.
#
#   bash tests/bench/profile.sh [--secs 10] [--durable true|false] [--stream] [--rate R] [--out DIR] [--bin PATH] [--freq HZ]
#
# --rate R: the recorded phase is `oha -q R` (a fixed rate, as the latency targets are measured) instead
# of as many requests as 64 connections can send; what a request costs where each commit is small.
# --bin PATH: profile that binary instead of building this checkout (another commit's build with
# symbols: CARGO_PROFILE_<profile>_STRIP=none, CARGO_PROFILE_<profile>_DEBUG=line-tables-only), to
# compare the buckets of two builds.
# --freq HZ: samples per second (999). Each sample copies 16 KiB of stack on the profiled core; at 999
# that cost can hide a few per cent between two builds, at 97 (with --secs 20 for enough samples) not.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
secs=10 durable=true stream=false out="" rate="" bin="" freq=999
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) secs="$2"; shift 2 ;;
    --durable) durable="$2"; shift 2 ;;
    --stream) stream=true; shift ;;
    --out) out="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --bin) bin="$(realpath "$2")"; shift 2 ;;
    --freq) freq="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "perf is not installed (Debian: linux-perf)" >&2; exit 2; }
oha="$(command -v oha || echo "$root/target/bench-tools/bin/oha")"
[ -x "$oha" ] || cargo install oha --locked --version 1.16.0 --root "$root/target/bench-tools" >&2

cd "$root"
rustup target add wasm32-wasip2 wasm32-unknown-unknown >/dev/null 2>&1 || true
cargo build --release -p gatehouse-tests --example compare >&2
if [ -z "$bin" ]; then
  # Symbols in the host, and (GATEHOUSE_PLUGIN_NAMES) the guests' function names in perf's map of their code.
  CARGO_TARGET_DIR="$root/target/profiling" CARGO_PROFILE_PRODUCTION_STRIP=none CARGO_PROFILE_PRODUCTION_DEBUG=line-tables-only \
    GATEHOUSE_PLUGIN_NAMES=1 cargo build --profile production --features jemalloc -p gatehouse-cli >&2
  bin="$root/target/profiling/production/gatehouse"
fi

if [ -n "$out" ]; then mkdir -p "$out" && work="$(cd "$out" && pwd)"; else work="$(mktemp -d -t gatehouse-profile-XXXX)"; fi
source "$root/tests/bench/common.sh"
start_mock "$root/target/release/examples/compare"
start_gatehouse "$bin" "$work" "$durable" GATEHOUSE_WASM_PERFMAP=1

body="$(chat_body "$stream")"
load() {
  taskset -c 0 "$oha" --no-tui -z "$1" -c 64 "${@:2}" -m POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d "$body" "http://127.0.0.1:$port/chat/completions"
}
load 3s >/dev/null   # warm-up: plugin pools, connections, redb pages
cpu0="$(awk '{print $14+$15}' /proc/$gh/stat)"
perf record -F "$freq" -g --call-graph dwarf,16384 -o "$work/perf.data" -p "$gh" -- sleep "$secs" 2>"$work/perf.log" &
rec=$!
load "${secs}s" ${rate:+-q "$rate" --latency-correction} | tee "$work/oha.txt" | grep -E "Requests/sec|Success rate|\[200\]|50.00% in|99.00% in"
wait "$rec" || true
cpu1="$(awk '{print $14+$15}' /proc/$gh/stat)"
reqs="$(grep -oE '\[200\] [0-9]+' "$work/oha.txt" | awk '{print $2}')"
echo "CPU µs per request during the run: $(( (cpu1 - cpu0) * 10000 / (reqs > 0 ? reqs : 1) ))"
# `head` closes the pipe early; under `pipefail` perf's SIGPIPE would end the script before the buckets.
perf report -i "$work/perf.data" --no-children --sort comm,dso -g none --percent-limit 1 --stdio 2>/dev/null | grep -v '^#' | sed '/^$/d' | head -30 || true
perf report -i "$work/perf.data" --children --sort sym -g none --percent-limit 2 --stdio 2>/dev/null | grep -v '^#' | sed '/^$/d' | head -70 || true
python3 "$root/tests/bench/perf_buckets.py" "$work/perf.data"
echo "perf data: $work/perf.data"
