#!/usr/bin/env bash
# A profile-guided (PGO) release build of Gatehouse: the same source and bundled plugins, with LLVM
# told where the chat path spends its time. 7-31 % less CPU per request than the plain release build
# on the harness's workload (paired runs; docs/benchmarks.md#profile-guided-build).
#
#   bash tests/bench/pgo.sh [--secs 10]
#
# 1. an instrumented release build (`-Cprofile-generate`) in target/pgo/gen;
# 2. training: the compare mock on core 0, the instrumented server on core 1 with the harness's config
#    (durable writes, the default pipeline: policy, Prompt Shield, PII/DLP, canary, OpenAI adapter,
#    usage, receipts), `oha -c 64` for SECS seconds of JSON chat and SECS of streamed chat, a few admin
#    reads, then SIGTERM (the profile is written when the server exits);
# 3. `llvm-profdata merge` (rustup's `llvm-tools`, the LLVM of this rustc);
# 4. the optimised build (`-Cprofile-use`) in target/pgo/use.
# Prints the optimised binary's path: target/pgo/use/production/gatehouse. Both builds use the fat-LTO production profile
# builds (~13 min each from scratch on 2 cores). The guests are not affected: the host's build script
# builds the bundled plugins without the outer RUSTFLAGS (target/plugins, shared with other builds).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
secs=10
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) secs="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$root"
rustup target add wasm32-wasip2 wasm32-unknown-unknown >/dev/null 2>&1 || true
rustup component add llvm-tools >&2
profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
[ -x "$profdata" ] || { echo "llvm-profdata not found at $profdata (rustup component add llvm-tools)" >&2; exit 2; }
oha="$(command -v oha || echo "$root/target/bench-tools/bin/oha")"
[ -x "$oha" ] || cargo install oha --locked --version 1.16.0 --root "$root/target/bench-tools" >&2

out="$root/target/pgo"
raw="$out/raw"
mkdir -p "$out"
echo "== instrumented build (target/pgo/gen)" >&2
RUSTFLAGS="-Cprofile-generate=$raw" cargo build --profile production --features jemalloc -p gatehouse-cli --bin gatehouse --target-dir "$out/gen" >&2
cargo build --release -p gatehouse-tests --example compare >&2
# Build scripts and proc macros of the instrumented build wrote profiles too: only the server's count.
rm -rf "$raw"

echo "== training" >&2
compare="$root/target/release/examples/compare"
source "$root/tests/bench/common.sh"
start_mock "$compare"
work="$(mktemp -d -t gatehouse-pgo-XXXX)"
start_gatehouse "$out/gen/production/gatehouse" "$work" true
for stream in false true; do
  body="$(chat_body "$stream")"
  taskset -c 0 "$oha" --no-tui -z "${secs}s" -c 64 -m POST -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d "$body" "http://127.0.0.1:$port/chat/completions" > "$work/oha.txt"
  ok="$(grep -oE '\[200\] [0-9]+' "$work/oha.txt" | awk '{print $2}')"
  echo "  stream=$stream: ${ok:-0} answers" >&2
  [ "${ok:-0}" -gt 0 ] || { echo "training failed: no successful chat answers" >&2; cat "$work/oha.txt" "$work/gatehouse.log" >&2; exit 1; }
done
for path in /audit-logs /groups /api/admin/usage; do
  taskset -c 0 "$oha" --no-tui -n 200 -c 4 -H "authorization: Bearer $key" "http://127.0.0.1:$port$path" >/dev/null
done
kill -TERM "$gh"
wait "$gh" || true
rm -rf "$work"
ls "$raw"/*.profraw >/dev/null 2>&1 || { echo "the instrumented server wrote no profile to $raw" >&2; exit 1; }

echo "== merge" >&2
"$profdata" merge -o "$out/merged.profdata" "$raw"
# Name the profile by its content so the optimised build's RUSTFLAGS change whenever the profile
# does (cargo tracks RUSTFLAGS, not the files they name).
sum="$(sha256sum "$out/merged.profdata" | cut -c1-16)"
rm -f "$out"/gatehouse-*.profdata
mv "$out/merged.profdata" "$out/gatehouse-$sum.profdata"

echo "== optimised build (target/pgo/use)" >&2
RUSTFLAGS="-Cprofile-use=$out/gatehouse-$sum.profdata" cargo build --profile production --features jemalloc -p gatehouse-cli --bin gatehouse --target-dir "$out/use" >&2
echo "$out/use/production/gatehouse"
