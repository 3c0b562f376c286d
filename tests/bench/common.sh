# Shared by the bench scripts (sourced, not run): child processes killed on exit, a free loopback
# port, and the compare mock on core 0.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_mock COMPARE_BIN -> sets mock_port; the mock runs on core 0 until exit.
start_mock() {
  mock_port="$(free_port)"
  taskset -c 0 "$1" mock --port "$mock_port" >/dev/null 2>&1 &
  pids+=($!)
}
