"""Runs the synthetic_bench example inside WebAssembly (Wasmtime, Cranelift).

    cargo build --release -p retriever-local --example synthetic_bench --target wasm32-wasip2
    pip install wasmtime==50.0.1      # Python bindings; ships the Wasmtime library
    python3 plugins/retriever-local/eval/wasm_bench.py $CARGO_TARGET_DIR/wasm32-wasip2/release/examples/synthetic_bench.wasm

The example is a WASI command component; the library's host-log import is
stubbed (the bench never logs). Further arguments are passed on (the number
of documents, 10,000 by default; the ranker; a corpus folder to read instead of
the synthetic one). The model folder is mounted read-only at its
own path, as the example names the model file by its path in the repository.
"""
import os, sys, time
from wasmtime import Engine, Store, Config, WasiConfig
from wasmtime.component import Component, Linker
cfg = Config()
engine = Engine(cfg)
comp = Component.from_file(engine, sys.argv[1])
linker = Linker(engine)
linker.add_wasip2()
with linker.root() as root:
    with root.add_instance("gatehouse:plugin/host-log@0.1.0") as inst_:
        inst_.add_func("log", lambda store, level, msg: None)
store = Store(engine)
# The host's default cap for one plugin instance (`plugins.memory_limit_mb`).
store.set_limits(memory_size=int(os.environ.get("WASM_BENCH_MEMORY_MB", "64")) << 20)
w = WasiConfig()
w.inherit_stdout(); w.inherit_stderr()
args = sys.argv[2:]
# A corpus folder as the third argument after the component (see synthetic_bench): mounted at its own path.
if len(args) >= 3:
    args = args[:2] + [os.path.realpath(args[2])]
    w.preopen_dir(args[2], args[2])
w.argv = ["bench"] + args
# The model file, at the path the example was built with (read-only, as the host grants it).
model_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model")
w.preopen_dir(os.path.realpath(model_dir), os.path.realpath(model_dir))
store.set_wasi(w)
inst = linker.instantiate(store, comp)
names = [n for n in ["wasi:cli/run@0.2.%d" % i for i in range(0, 10)]]
for n in names:
    idx = inst.get_export_index(store, n)
    if idx is not None:
        run = inst.get_export_index(store, "run", idx)
        f = inst.get_func(store, run)
        t = time.time(); print("result", f(store)); print("wall", time.time() - t)
        break
else:
    print("no run export")
