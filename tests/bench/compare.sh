#!/usr/bin/env bash
# Comparative benchmark: direct-to-mock, nginx, LiteLLM, Gatehouse (durable and relaxed).
# Installs what is missing (Debian nginx, LiteLLM's proxy in a venv, oha), then runs the Rust driver
# tests/examples/compare/ and prints one table. Figures and method: docs/benchmarks.md.
#
#   bash tests/bench/compare.sh [--secs 10] [--rates 200,1000] [--only direct,nginx,litellm,durable,relaxed] [--rounds 3]
#                               [--markdown FILE] [--pgo target/pgo/use/production/gatehouse]
# --pgo PATH adds a row for that binary (durable): the profile-guided build tests/bench/pgo.sh makes.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tools="$root/target/bench-tools"
venv="$root/target/bench-venv"
mkdir -p "$tools"

if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  echo "installing nginx (Debian)" >&2
  { apt-get install -y nginx-light || { apt-get update && apt-get install -y nginx-light; }; } >&2 || echo "nginx install failed; its row will say so" >&2
fi
# The benchmark runs its own nginx (its own prefix, config and port), never the system one.

if [ ! -x "$venv/bin/litellm" ]; then
  echo "installing LiteLLM's proxy into $venv (a few minutes)" >&2
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q 'litellm[proxy]'; } >&2 || echo "LiteLLM install failed; its row will say so" >&2
fi

oha="$(command -v oha || true)"
if [ -z "$oha" ]; then
  oha="$tools/bin/oha"
  if [ ! -x "$oha" ]; then
    echo "building oha (cargo install oha --locked)" >&2
    cargo install oha --locked --version 1.16.0 --root "$tools" >&2
  fi
fi

# The wasm target is needed to build the bundled plugins.
rustup target add wasm32-wasip2 wasm32-unknown-unknown >/dev/null 2>&1 || true
cd "$root"
# The production profile (fat LTO), as the published figures were measured; the driver itself is a
# plain release build.
cargo build --profile production --features jemalloc -p gatehouse-cli --bin gatehouse
GATEHOUSE_TEST_BINARY="$root/target/production/gatehouse" exec cargo run --release -p gatehouse-tests --example compare -- --oha "$oha" --litellm "$venv/bin/litellm" "$@"
