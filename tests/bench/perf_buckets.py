#!/usr/bin/env python3
"""Where a profile's samples go, in exclusive buckets that add up to 100 %.

    python3 tests/bench/perf_buckets.py PERF_DATA

Reads `perf script` of a `perf record -g --call-graph dwarf` profile (tests/bench/profile.sh writes
one) and puts every sample in the first bucket its stack reaches, walking from the leaf up: a sample
in the kernel's TCP send path under the upstream client counts as "socket send", one in jemalloc
under a plugin call as "allocator". perf's own `--children` view gives inclusive shares, which
overlap; these do not. Method and results: docs/benchmarks.md (eleventh pass).
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
    ("guest code", r"^wasm\["),
    ("wasmtime instantiation", r"instantiate_async"),
    ("wasmtime store drop", r"drop_in_place<wasmtime::runtime::store::Store"),
    ("wasmtime store creation", r"Plugin::store_with"),
    ("plugin call: lift, lower, enter", r"wasmtime::runtime::component::func|wasmtime::runtime::func|call_async|TypedFunc"),
    ("store writer: redb commit", r"WriteTransaction::commit|fdatasync"),
    ("store writer: the rest", r"group_commit"),
    ("receipts", r"receipts|ed25519|curve25519"),
    ("serde_json", r"serde_json"),
    ("security pipeline (host side)", r"guard::run|security::"),
    ("provider attempt (host side)", r"adapters::Provider|ProviderAttempt|provider_calls"),
    ("upstream client", r"hyper_util::client|reqwest|Transport::send"),
    ("response", r"response::|handler::finish"),
    ("request parsing", r"request::parse|handler::prepare|idempotency"),
    ("auth and limits", r"auth::"),
    ("HTTP server and middleware", r"UpgradeableConnection|hyper::proto|axum::|from_fn"),
    ("tokio", r"tokio::runtime"),
]


def samples(text):
    """(thread, [symbols from the leaf up]) per sample of `perf script` output."""
    thread, stack = None, None
    for line in text.splitlines():
        if not line.strip():
            if stack is not None:
                yield thread, stack
            stack = None
        elif not line[0].isspace():
            thread, stack = line.split()[0], []
        elif stack is not None:
            m = re.match(r"\s+[0-9a-f]+ (.*) \((.*)\)$", line)
            if m:
                stack.append(re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)))
    if stack is not None:
        yield thread, stack


def bucket(thread, stack):
    for frame in stack:
        for name, pattern in RULES:
            if re.search(pattern, frame):
                return name
    return f"other ({thread})"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = subprocess.run(["perf", "script", "-i", sys.argv[1]], capture_output=True, text=True, errors="replace", check=True)
    counts = collections.Counter(bucket(t, s) for t, s in samples(out.stdout))
    total = sum(counts.values()) or 1
    for name, n in counts.most_common():
        print(f"{100 * n / total:5.1f} %  {name}")
    print(f"{total} samples")


if __name__ == "__main__":
    main()
