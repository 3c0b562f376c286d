#!/usr/bin/env python3
"""Where a profile's samples go, in exclusive buckets that add up to 100 %.

    python3 tests/bench/perf_buckets.py PERF_DATA     # or a file holding `perf script`'s output

Reads `perf script` of a `perf record -g --call-graph dwarf` profile (tests/bench/profile.sh writes
one) and puts every sample in the first bucket its stack reaches, walking from the leaf up: a sample
in the kernel's TCP send path under the upstream client counts as "socket send", one in jemalloc
under a plugin call as "allocator". perf's own `--children` view gives inclusive shares, which
overlap; these do not. Method and results: docs/benchmarks.md#where-the-time-goes.

Guest code is split by plugin when the server noted its plugins' code ranges beside perf's map
(`/tmp/perf-<pid>.plugins`, written with GATEHOUSE_WASM_PERFMAP=1), and the guest functions that
take the most samples are listed after the buckets (named when the guests kept their names:
GATEHOUSE_PLUGIN_NAMES=1 at build time; tests/bench/profile.sh sets both).
"""

import collections
import re
import subprocess
import sys

# (bucket, pattern on a frame's symbol), tried in this order at each frame from the leaf up.
RULES = [
    ("kernel: socket send", r"tcp_sendmsg|sock_sendmsg|__sys_sendto|sock_write_iter|do_writev"),
    ("kernel: socket receive", r"tcp_recvmsg|sock_recvmsg|sock_read_iter"),
    ("kernel: scheduling, futex, epoll", r"epoll_wait|futex|schedule|do_nanosleep"),
    ("allocator", r"_rjem|^malloc|^free|sdallocx"),
    ("page faults", r"asm_exc_page_fault|handle_mm_fault"),
    ("instance reset: PAGEMAP_SCAN", r"pagemap|do_pagemap"),
    ("wasmtime instantiation", r"instantiate_async"),
    ("wasmtime store drop", r"drop_in_place<wasmtime::runtime::store::Store"),
    ("wasmtime store creation", r"Plugin::store_with"),
    ("plugin call: lift, lower, enter", r"wasmtime::runtime::component::func|wasmtime::runtime::func|call_async|TypedFunc"),
    ("store writer: redb commit", r"WriteTransaction::commit|fdatasync"),
    ("store writer: the rest", r"group_commit"),
    ("receipts", r"receipts|ed25519|curve25519"),
    ("serde_json", r"serde_json"),
    ("security pipeline (host side)", r"guard::run|security::|chat::input::|chat::screen::"),
    ("provider attempt (host side)", r"adapters::Provider|ProviderAttempt|provider_calls|chat::attempt::"),
    ("upstream client", r"hyper_util::client|reqwest|Transport::send"),
    ("response", r"response::|handler::finish|pipeline::finish"),
    ("request parsing", r"request::parse|handler::prepare|pipeline::prepare|idempotency"),
    ("auth, admission, body intake", r"auth::|admission::|intake::|middleware::authenticate|middleware::intake"),
    # the chat pipeline's own code between its stages (module `handler` before it was renamed `pipeline`)
    ("chat pipeline (the rest)", r"chat::pipeline::|chat::handler::|chat::chain::|run_chain"),
    ("HTTP server and middleware", r"UpgradeableConnection|hyper::proto|axum::|from_fn"),
    ("tokio", r"tokio::runtime"),
]


def frames(text):
    """(thread, [(address, symbol, dso) from the leaf up]) per sample of `perf script` output."""
    thread, stack = None, None
    for line in text.splitlines():
        if not line.strip():
            if stack is not None:
                yield thread, stack
            stack = None
        elif not line[0].isspace():
            thread, stack = line.split()[0], []
        elif stack is not None:
            m = re.match(r"\s+([0-9a-f]+) (.*) \((.*)\)$", line)
            if m:
                stack.append((int(m.group(1), 16), re.sub(r"\+0x[0-9a-f]+$", "", m.group(2)), m.group(3)))
    if stack is not None:
        yield thread, stack


class Plugins:
    """Which plugin's code an address is in, from the ranges beside perf's map (empty without them)."""

    def __init__(self):
        self.ranges = []  # (start, end, name), in the order the server noted them
        self.read = set()

    def note(self, dso):
        m = PERF_MAP.search(dso)
        if not m or dso in self.read:
            return
        self.read.add(dso)
        try:
            with open(m.group(1) + ".plugins") as f:
                for line in f:
                    start, end, name = line.split(maxsplit=2)
                    self.ranges.append((int(start, 16), int(end, 16), name.strip()))
        except OSError:
            pass

    def name(self, address):
        # The last range noted that holds the address: code memory freed by a reload may be reused.
        for start, end, name in reversed(self.ranges):
            if start <= address < end:
                return name
        return None


PERF_MAP = re.compile(r"(.*/perf-\d+)\.map$")  # group 1: the path that the plugins' ranges share
# wasmtime's compiled entry and exit trampolines and the builtins guest code calls (a funcref
# table's lazy initialisation, say): in perf's map beside the guests' functions, but not theirs.
JIT_GLUE = "plugin call: wasmtime trampolines and builtins"


def bucket(thread, stack):
    """The first bucket a sample's (address, symbol, dso) frames reach from the leaf up, and the
    frame that decided it (None for "other"). A frame in perf's map of JIT code is the plugins'
    code whatever its name (a named guest function can look like a host one: `serde_json::…`), or
    wasmtime's glue around it."""
    for frame in stack:
        _, symbol, dso = frame
        if PERF_MAP.search(dso):
            return (JIT_GLUE if re.search(r"trampoline|^wasmtime_builtin", symbol) else "guest code"), frame
        for name, pattern in RULES:
            if re.search(pattern, symbol):
                return name, frame
    return f"other ({thread})", None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as f:
        recorded = f.read(8) == b"PERFILE2"
    if recorded:
        text = subprocess.run(["perf", "script", "-i", sys.argv[1]], capture_output=True, text=True, errors="replace", check=True).stdout
    else:  # `perf script`'s output saved before (it takes minutes on a long profile)
        with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
            text = f.read()
    plugins = Plugins()
    counts, guest_functions = collections.Counter(), collections.Counter()
    for thread, stack in frames(text):
        name, frame = bucket(thread, stack)
        if name == "guest code":
            address, sym, dso = frame
            plugins.note(dso)
            plugin = plugins.name(address)
            if plugin:
                name = f"guest code: {plugin}"
            guest_functions[(plugin or "?", sym)] += 1
        counts[name] += 1
    total = sum(counts.values()) or 1
    for name, n in counts.most_common():
        print(f"{100 * n / total:5.1f} %  {name}")
    print(f"{total} samples")
    if guest_functions:
        print("guest functions with the most samples:")
        top = guest_functions.most_common(15)
        names = demangle([sym for (_, sym), _ in top])
        for ((plugin, _), n), sym in zip(top, names):
            print(f"{100 * n / total:5.2f} %  {plugin}: {sym[:120]}")


def demangle(symbols):
    """Rust symbols as source names (binutils' c++filt reads both manglings; wasmtime is built
    without its own demangler), without their hashes; unchanged where c++filt is missing."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True, check=True).stdout
        names = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return symbols
    if len(names) != len(symbols):
        return symbols
    # v0 names carry each crate's disambiguator (`core[c5930c85a12de822]`); legacy ones a hash.
    return [re.sub(r"::h[0-9a-f]{16}$", "", re.sub(r"__rustc\[[0-9a-f]+\]::|\[[0-9a-f]{16}\]", "", n)) for n in names]


if __name__ == "__main__":
    main()
