# Shared by the bench scripts (sourced, not run): child processes killed on exit, a free loopback
# port, and the compare mock on core 0.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The harness's admin key (targets.rs GATEHOUSE_KEY).
key="sk-bench-admin-0123456789abcdefghijklmnopqrstuvwxyz"

# chat_body STREAM -> the harness's chat request as JSON (targets.rs PROMPT, the OpenAI adapter, no
# knowledge base); STREAM is true or false.
chat_body() {
  printf '{"model":"openai/gpt-mock","index":"Zero-Knowledge","stream":%s,"messages":[{"role":"user","content":"Summarise in one sentence why a gateway should add little latency."}]}' "$1"
}

# start_mock COMPARE_BIN -> sets mock_port; the mock runs on core 0 until exit.
start_mock() {
  compare_bin="$1"
  mock_port="$(free_port)"
  taskset -c 0 "$1" mock --port "$mock_port" >/dev/null 2>&1 &
  pids+=($!)
}

# start_gatehouse BIN WORK DURABLE [VAR=VALUE...] -> sets port and gh: BIN on core 1 with the harness's
# config against the mock (WORK/gatehouse.toml, log WORK/gatehouse.log, data WORK/data), the VARs in its
# environment; returns once it answers /health, or fails with the end of its log. After start_mock.
start_gatehouse() {
  local bin="$1" work="$2" durable="$3"
  shift 3
  port="$(free_port)"
  "$compare_bin" gatehouse-config "$port" "$mock_port" "$work/data" "$durable" > "$work/gatehouse.toml"
  env "$@" GATEHOUSE_BOOTSTRAP_ADMIN_KEY="$key" RUST_LOG=warn taskset -c 1 "$bin" serve --config "$work/gatehouse.toml" \
    >/dev/null 2>"$work/gatehouse.log" &
  gh=$!
  pids+=($gh)
  for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && return 0; sleep 0.1; done
  echo "Gatehouse ($bin) did not become healthy; the end of its log:" >&2
  tail -20 "$work/gatehouse.log" >&2
  return 1
}
