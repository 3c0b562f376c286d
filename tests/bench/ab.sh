#!/usr/bin/env bash
# CPU per request of two Gatehouse binaries, alternated: the quickest way to tell whether a change made
# the chat path cheaper on a noisy machine. Each run starts the binary on core 1 with the harness's
# config (durable writes, full plugin pipeline) against the compare mock on core 0, warms up for 3 s,
# then serves `oha -c 64` for SECS seconds; CPU per request is the server's CPU time over that phase
# divided by the 200s it served. Runs alternate A, B, A, B… (every other pair B first, so neither
# always follows the other); the summary gives each binary's median and the median of the per-pair
# ratios B/A. A fresh binary compiles its plugins on its first start (and compresses them into the
# compile cache in the background), so one unmeasured start of each comes first.
#
#   bash tests/bench/ab.sh [--runs 6] [--secs 8] [--rate R] [--plugins-a DIR] [--plugins-b DIR] A_BINARY B_BINARY
#
# --plugins-a/--plugins-b DIR copy DIR's *.wasm components into that binary's watched plugin folder
# before each start, so they replace the bundled ones of the same name: the same binary with one
# plugin from another commit tells how much of a difference that plugin makes.
#
# With --rate R the measured phase is `oha -q R --latency-correction` instead (latency from the
# scheduled send time): each run also prints the answer time's p50 and p99, and the summary gives each
# binary's medians and the per-pair ratio of the p50s — how a change moves the latency at a fixed rate
# (the issue's added-latency targets are measured at 1,000 req/s), where each commit is small.
#
# Build both first with the production profile, as every figure in the history was (e.g. copy
# target/production/gatehouse aside, change, `cargo build --profile production
# --features jemalloc -p gatehouse-cli`). Method and
# results: docs/benchmarks.md#paired-runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs=6 secs=8 rate="" plugins_a="" plugins_b=""
while [ $# -gt 2 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --secs) secs="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --plugins-a) plugins_a="$(realpath "$2")"; shift 2 ;;
    --plugins-b) plugins_b="$(realpath "$2")"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: $0 [--runs N] [--secs S] [--rate R] [--plugins-a DIR] [--plugins-b DIR] A_BINARY B_BINARY" >&2; exit 2; }
a="$(realpath "$1")" b="$(realpath "$2")"
oha="$(command -v oha || echo "$root/target/bench-tools/bin/oha")"
[ -x "$oha" ] || cargo install oha --locked --version 1.16.0 --root "$root/target/bench-tools" >&2
cd "$root"
cargo build --release -p gatehouse-tests --example compare >&2
compare="$root/target/release/examples/compare"
source "$root/tests/bench/common.sh"
start_mock "$compare"
body="$(chat_body false)"

# one BIN SECS -> "rps cpu_us_per_request p50_ms p99_ms" (SECS 0: start, warm up, stop; the
# percentiles are oha's, "-" without --rate)
one() {
  local work port gh cpu0 cpu1 reqs rps p50 p99
  work="$(mktemp -d -t gatehouse-ab-XXXX)"
  if [ -n "$3" ]; then mkdir -p "$work/data/plugins" && cp "$3"/*.wasm "$work/data/plugins/"; fi
  start_gatehouse "$1" "$work" true
  load() {
    taskset -c 0 "$oha" --no-tui -z "$1" -c 64 "${@:2}" -m POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
      -d "$body" "http://127.0.0.1:$port/chat/completions"
  }
  load 3s >/dev/null
  if [ "$2" != 0 ]; then
    cpu0="$(awk '{print $14+$15}' /proc/$gh/stat)"
    if [ -n "$rate" ]; then
      load "${2}s" -q "$rate" --latency-correction --output-format json > "$work/oha.json"
      read -r rps reqs p50 p99 < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["statusCodeDistribution"].get("200", 0)
p = r["latencyPercentiles"]
print(int(r["summary"]["requestsPerSec"]), ok, "%.3f" % (p["p50"] * 1000), "%.3f" % (p["p99"] * 1000))' "$work/oha.json") || true
      # (An unreadable report leaves them empty; the server below is stopped all the same.)
    else
      load "${2}s" > "$work/oha.txt"
      reqs="$(grep -oE '\[200\] [0-9]+' "$work/oha.txt" | awk '{print $2}')"
      rps="$(grep -oE 'Requests/sec:[[:space:]]+[0-9.]+' "$work/oha.txt" | awk '{printf "%d", $2}')"
      p50=- p99=-
    fi
    cpu1="$(awk '{print $14+$15}' /proc/$gh/stat)"
    echo "$rps $(( (cpu1 - cpu0) * 10000 / (${reqs:-0} > 0 ? reqs : 1) )) $p50 $p99"
  fi
  kill "$gh" 2>/dev/null || true
  wait "$gh" 2>/dev/null || true
  rm -rf "$work"
}

one "$a" 0 "$plugins_a"
one "$b" 0 "$plugins_b"
declare -a ca cb la lb
for i in $(seq 1 "$runs"); do
  if [ $((i % 2)) -eq 1 ]; then order="a b"; else order="b a"; fi
  for which in $order; do
    bin="$a" plugins="$plugins_a"; [ "$which" = b ] && bin="$b" plugins="$plugins_b"
    read -r rps cpu p50 p99 < <(one "$bin" "$secs" "$plugins")
    if [ -n "$rate" ]; then
      printf 'run %d  %s  %6s rps  %4s µs/request  p50 %s ms  p99 %s ms\n' "$i" "$which" "$rps" "$cpu" "$p50" "$p99"
    else
      printf 'run %d  %s  %6s rps  %4s µs/request\n' "$i" "$which" "$rps" "$cpu"
    fi
    if [ "$which" = a ]; then ca+=("$cpu"); la+=("$p50/$p99"); else cb+=("$cpu"); lb+=("$p50/$p99"); fi
  done
done
python3 - "${ca[*]}" "${cb[*]}" "${la[*]}" "${lb[*]}" <<'EOF'
import statistics, sys
a = [int(x) for x in sys.argv[1].split()]
b = [int(x) for x in sys.argv[2].split()]
ratios = [y / x for x, y in zip(a, b) if x > 0]
print(f"A median {statistics.median(a)} µs/request ({min(a)}-{max(a)})")
print(f"B median {statistics.median(b)} µs/request ({min(b)}-{max(b)})")
print(f"B/A per pair: median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); B cheaper in {sum(r < 1 for r in ratios)} of {len(ratios)} pairs")
if "-" not in sys.argv[3]:
    la = [tuple(map(float, x.split("/"))) for x in sys.argv[3].split()]
    lb = [tuple(map(float, x.split("/"))) for x in sys.argv[4].split()]
    for name, l in (("A", la), ("B", lb)):
        print(f"{name} latency: p50 median {statistics.median(x[0] for x in l):.3f} ms, p99 median {statistics.median(x[1] for x in l):.3f} ms")
    r50 = [y[0] / x[0] for x, y in zip(la, lb)]
    print(f"B/A p50 per pair: median {statistics.median(r50):.2f} ({min(r50):.2f}-{max(r50):.2f}); B faster in {sum(r < 1 for r in r50)} of {len(r50)} pairs")
EOF
