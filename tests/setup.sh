#!/usr/bin/env bash
# Everything the test suite needs beyond Rust, installed when missing (the README's test command runs
# this first; so does CI):
#   rust     the WebAssembly targets the bundled and test plugins build for
#   python   the OpenAI SDK, schemathesis and the receipt verifier's packages (tests/python/requirements.txt)
#   postgres the distribution's PostgreSQL server binaries: the fleet tests start a throwaway cluster
#   chromium Debian's chromium and chromium-driver: the console's browser tests drive them (WebDriver)
#   policy-tools  the toolchains of `gatehouse plugin build` for Python and JavaScript policies
#            (tests/policy_languages.rs): componentize-py in a virtualenv, componentize-js from
#            sdk/tools/package-lock.json, both in $GATEHOUSE_TOOLS (default ~/.cache/gatehouse-tools; not under ~/.cache/gatehouse,
#            wasmtime's compiled-code cache, whose cleaner deletes files it did not write)
#
#   bash tests/setup.sh [rust] [python] [postgres] [chromium] [policy-tools]     (no argument: all five)
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

# The versions `gatehouse plugin build` requires (host/cli/src/author/embedded.rs); skipped when present.
COMPONENTIZE_PY=0.25.1
setup_policy_tools() {
  local tools="${GATEHOUSE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/gatehouse-tools}"
  mkdir -p "$tools"
  # Node.js and npm for componentize-js, Python's venv module for componentize-py: Debian's packages.
  command -v npm >/dev/null || apt_install nodejs npm
  python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv
  if [ "$("$tools/py/bin/componentize-py" --version 2>/dev/null)" = "componentize-py $COMPONENTIZE_PY" ]; then
    echo "componentize-py $COMPONENTIZE_PY present"
  else
    rm -rf "$tools/py"
    python3 -m venv "$tools/py"
    "$tools/py/bin/pip" install -q "componentize-py==$COMPONENTIZE_PY"
  fi
  if cmp -s sdk/tools/package-lock.json "$tools/js/package-lock.json" && [ -d "$tools/js/node_modules/@bytecodealliance/componentize-js" ]; then
    echo "componentize-js present"
  else
    rm -rf "$tools/js" && mkdir -p "$tools/js"
    cp sdk/tools/package.json sdk/tools/package-lock.json "$tools/js/"
    (cd "$tools/js" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(rust python postgres chromium policy-tools)
for p in "${parts[@]}"; do
  case "$p" in
    rust | python | postgres | chromium) "setup_$p" ;;
    policy-tools) setup_policy_tools ;;
    *) echo "unknown part $p (rust, python, postgres, chromium, policy-tools)" >&2; exit 2 ;;
  esac
done
