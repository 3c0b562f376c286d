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
#   bash tests/bench/ab.sh [--runs 6] [--secs 8] A_BINARY B_BINARY
#
# Build both first (e.g. copy target/release/gatehouse aside, change, rebuild). Method and results:
# docs/benchmarks.md (eleventh pass).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs=6 secs=8
while [ $# -gt 2 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --secs) secs="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: $0 [--runs N] [--secs S] A_BINARY B_BINARY" >&2; exit 2; }
a="$(realpath "$1")" b="$(realpath "$2")"
oha="$(command -v oha || echo "$root/target/bench-tools/bin/oha")"
[ -x "$oha" ] || cargo install oha --locked --version 1.16.0 --root "$root/target/bench-tools" >&2
cd "$root"
cargo build --release -p gatehouse-tests --example compare >&2
compare="$root/target/release/examples/compare"
source "$root/tests/bench/common.sh"
start_mock "$compare"
key="sk-bench-admin-0123456789abcdefghijklmnopqrstuvwxyz"   # targets.rs GATEHOUSE_KEY
body='{"model":"openai/gpt-mock","index":"Zero-Knowledge","messages":[{"role":"user","content":"Summarise in one sentence why a gateway should add little latency."}]}'

# one BIN SECS -> "rps cpu_us_per_request" (SECS 0: start, warm up, stop)
one() {
  local work port gh cpu0 cpu1 reqs rps
  work="$(mktemp -d -t gatehouse-ab-XXXX)"
  port="$(free_port)"
  "$compare" gatehouse-config "$port" "$mock_port" "$work/data" true > "$work/gatehouse.toml"
  GATEHOUSE_BOOTSTRAP_ADMIN_KEY="$key" RUST_LOG=warn taskset -c 1 "$1" serve --config "$work/gatehouse.toml" >/dev/null 2>"$work/log" &
  gh=$!
  for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
  load() {
    taskset -c 0 "$oha" --no-tui -z "$1" -c 64 -m POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
      -d "$body" "http://127.0.0.1:$port/chat/completions"
  }
  load 3s >/dev/null
  if [ "$2" != 0 ]; then
    cpu0="$(awk '{print $14+$15}' /proc/$gh/stat)"
    load "${2}s" > "$work/oha.txt"
    cpu1="$(awk '{print $14+$15}' /proc/$gh/stat)"
    reqs="$(grep -oE '\[200\] [0-9]+' "$work/oha.txt" | awk '{print $2}')"
    rps="$(grep -oE 'Requests/sec:[[:space:]]+[0-9.]+' "$work/oha.txt" | awk '{printf "%d", $2}')"
    echo "$rps $(( (cpu1 - cpu0) * 10000 / (${reqs:-0} > 0 ? reqs : 1) ))"
  fi
  kill "$gh" 2>/dev/null || true
  wait "$gh" 2>/dev/null || true
  rm -rf "$work"
}

one "$a" 0
one "$b" 0
declare -a ca cb
for i in $(seq 1 "$runs"); do
  if [ $((i % 2)) -eq 1 ]; then order="a b"; else order="b a"; fi
  for which in $order; do
    bin="$a"; [ "$which" = b ] && bin="$b"
    read -r rps cpu < <(one "$bin" "$secs")
    printf 'run %d  %s  %6s rps  %4s µs/request\n' "$i" "$which" "$rps" "$cpu"
    if [ "$which" = a ]; then ca+=("$cpu"); else cb+=("$cpu"); fi
  done
done
python3 - "${ca[*]}" "${cb[*]}" <<'EOF'
import statistics, sys
a = [int(x) for x in sys.argv[1].split()]
b = [int(x) for x in sys.argv[2].split()]
ratios = [y / x for x, y in zip(a, b) if x > 0]
print(f"A median {statistics.median(a)} µs/request ({min(a)}-{max(a)})")
print(f"B median {statistics.median(b)} µs/request ({min(b)}-{max(b)})")
print(f"B/A per pair: median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); B cheaper in {sum(r < 1 for r in ratios)} of {len(ratios)} pairs")
EOF
