#!/usr/bin/env bash
# Overload: offer Gatehouse more chat requests than one core serves and see what admission control
# (`chat.max_in_flight`, 503 `Server busy`) does to the answers it gives. One key drives it, so its
# per-key share is the whole host and the per-IP cap is off (see where the server starts). The compare
# mock and oha on core 0, a release build of Gatehouse with the benchmark's config on core 1; for each limit, oha
# offers RATE requests/s open-loop (latency from the scheduled send time, up to 3,000 connections)
# with prompts of about PROMPT_BYTES of business prose, and the script prints answers per second,
# latency of the 200s and of the 503s, peak RSS and CPU. Method and figures: docs/reliability.md
# ("Overload").
#
#   bash tests/bench/overload.sh [--rate 2500] [--secs 8] [--limits "128 4096 1000000"] [--prompt-bytes 2048]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
rate=2500 secs=8 limits="128 4096 1000000" prompt_bytes=2048
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --secs) secs="$2"; shift 2 ;;
    --limits) limits="$2"; shift 2 ;;
    --prompt-bytes) prompt_bytes="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
oha="$(command -v oha || echo "$root/target/bench-tools/bin/oha")"
[ -x "$oha" ] || cargo install oha --locked --version 1.16.0 --root "$root/target/bench-tools" >&2

cd "$root"
rustup target add wasm32-wasip2 wasm32-unknown-unknown >/dev/null 2>&1 || true
cargo build --profile production --features jemalloc -p gatehouse-cli --bin gatehouse >&2
cargo build --release -p gatehouse-tests --example compare >&2
bin="$root/target/production/gatehouse"
compare="$root/target/release/examples/compare"

work="$(mktemp -d -t gatehouse-overload-XXXX)"
source "$root/tests/bench/common.sh"
start_mock "$compare"
python3 - "$prompt_bytes" > "$work/body.json" <<'PY'
import json, sys
n = int(sys.argv[1])
sentences = ["The quarterly report shows revenue up eight percent in the northern region. ",
             "Please summarise the main risks for the board and suggest two next steps. ",
             "Customer churn fell after the support team moved to a follow-the-sun rota. ",
             "Shipping costs rose in March because two carriers raised their fuel surcharges. "]
text, i = "", 0
while len(text) + len(sentences[i % 4]) <= max(n, len(sentences[0])):
    text += sentences[i % 4]; i += 1
print(json.dumps({"model": "openai/gpt-mock", "index": "Zero-Knowledge", "messages": [{"role": "user", "content": text.strip()}]}))
PY

for limit in $limits; do
  port="$(free_port)"
  rm -rf "$work/data"
  "$compare" gatehouse-config "$port" "$mock_port" "$work/data" true > "$work/gatehouse.toml"
  # One key from up to 3,000 connections on one address: its share is the whole host
  # (chat.key_share = 1) and there is no per-IP cap (server.max_connections_per_ip = 0), so what is
  # measured is the host-wide limit, as before fair admission (docs/decisions/fair-admission.md).
  GATEHOUSE_CHAT__MAX_IN_FLIGHT="$limit" GATEHOUSE_CHAT__KEY_SHARE=1 GATEHOUSE_SERVER__MAX_CONNECTIONS_PER_IP=0 \
    GATEHOUSE_BOOTSTRAP_ADMIN_KEY="$key" RUST_LOG=warn \
    taskset -c 1 "$bin" serve --config "$work/gatehouse.toml" >/dev/null 2>"$work/gatehouse-$limit.log" &
  gh=$!
  pids+=($gh)
  for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
  idle="$(awk '/VmRSS/ {print $2}' /proc/$gh/status)"
  cpu0="$(awk '{print $14+$15}' /proc/$gh/stat)"
  taskset -c 0 "$oha" --no-tui -z "${secs}s" -q "$rate" -c 3000 --latency-correction --stats-success-breakdown \
    --output-format json -t 60s -m POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -D "$work/body.json" "http://127.0.0.1:$port/chat/completions" > "$work/oha-$limit.json"
  cpu1="$(awk '{print $14+$15}' /proc/$gh/stat)"
  hwm="$(awk '/VmHWM/ {print $2}' /proc/$gh/status)"
  kill "$gh" 2>/dev/null || true
  wait "$gh" 2>/dev/null || true
  python3 - "$limit" "$rate" "$idle" "$hwm" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" "$work/oha-$limit.json" <<'PY'
import json, sys
limit, rate, idle, hwm, ticks, hz, path = sys.argv[1:]
d = json.load(open(path))
codes = d.get("statusCodeDistribution", {})
ok, busy = codes.get("200", 0), codes.get("503", 0)
other = sum(codes.values()) - ok - busy
secs = d["summary"]["total"]
good = d.get("latencyPercentilesSuccessful") or {}
bad = d.get("latencyPercentilesNotSuccessful") or {}
ms = lambda x: "-" if x is None else f"{x * 1000:.1f}"
cpu_s = int(ticks) / int(hz)
print(f"chat.max_in_flight = {limit}, offered {rate}/s for {secs:.1f} s:")
print(f"  200: {ok} ({ok / secs:.0f}/s), latency p50 / p90 / p99 {ms(good.get('p50'))} / {ms(good.get('p90'))} / {ms(good.get('p99'))} ms")
print(f"  503: {busy} ({busy / secs:.0f}/s), latency p50 / p99 {ms(bad.get('p50'))} / {ms(bad.get('p99'))} ms; other statuses {other}; "
      f"client-side errors {sum(d.get('errorDistribution', {}).values())} {d.get('errorDistribution', {})}")
print(f"  RSS idle {int(idle) / 1024:.1f} MiB, peak {int(hwm) / 1024:.1f} MiB; CPU {cpu_s:.2f} s ({cpu_s / secs:.0%} of the core)")
PY
done
