#!/usr/bin/env bash
# Everything the test suite needs beyond Rust, installed when missing (the README's test command runs
# this first; so does CI):
#   rust     the WebAssembly targets the bundled and test plugins build for
#   python   the OpenAI SDK, schemathesis and the receipt verifier's packages (tests/python/requirements.txt)
#   postgres the distribution's PostgreSQL server binaries: the fleet tests start a throwaway cluster
#   chromium Debian's chromium and chromium-driver: the console's browser tests drive them (WebDriver)
#
#   bash tests/setup.sh [rust] [python] [postgres] [chromium]     (no argument: all four)
#
# System packages come from apt (as root, or through sudo); nothing is downloaded at test time.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}

setup_rust() { rustup target add wasm32-wasip2 wasm32-unknown-unknown; }
setup_python() { pip install -q -r tests/python/requirements.txt; }
setup_postgres() {
  if command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    echo "PostgreSQL server binaries present"
  else
    apt_install postgresql
  fi
}
setup_chromium() {
  if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    echo "chromium and chromedriver present"
  else
    apt_install chromium chromium-driver
  fi
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(rust python postgres chromium)
for p in "${parts[@]}"; do
  case "$p" in
    rust | python | postgres | chromium) "setup_$p" ;;
    *) echo "unknown part $p (rust, python, postgres, chromium)" >&2; exit 2 ;;
  esac
done
