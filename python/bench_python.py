"""The course's Python benchmark flow, driven by `runlens bench --python`.

Reads one JSON job on stdin (written by src/bench/python.rs):
  {"model_dir": str, "pte": {"portable": str, "xnnpack": str}, "onnx": {"onnx": str}, "backends": [...],
   "threads": int, "warmup": int, "iters": int, "max_seconds": float,
   "inputs": [{"seq_len": int, "ids": [int], "mask": [int]}],
   "pad_to": {backend: int}}   (programs exported for a fixed length)
and runs, on exactly those token ids:
  python-eager     transformers eager (attn_implementation="eager") under
                   torch.inference_mode(), wrapped in export.py's SentenceEmbedder
  python-portable  executorch's _load_for_executorch on portable.pte
  python-xnnpack   the same on xnnpack.pte (and python-xnnpack-int8, -static
                   on the export variants; the static one gets its input padded
                   with [PAD] = 0 and mask 0 to its fixed length, as runlens does)
  python-onnx      ONNX Runtime's Python package on model.onnx (and python-onnx-int8):
                   an InferenceSession as runlens opens one (CPU execution provider,
                   every graph optimization, `threads` intra-op threads, sequential, no
                   spinning), fed input_ids, attention_mask and token_type_ids (zeros)
                   where the graph takes them; the output as it is (no pooling)
Prints one JSON object on stdout: {"versions": {...}, "loads": [...], "results":
[{"backend", "seq_len", "times_ms": [...]}], "interrupted": bool}; progress goes to stderr.
Ctrl-C stops and still prints what was measured.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def log(msg: str) -> None:
    print(f"[bench_python] {msg}", file=sys.stderr, flush=True)


def timed(fn, warmup: int, iters: int, max_seconds: float) -> list[float]:
    """Warm-ups, then up to `iters` timed runs within `max_seconds` (at least one)."""
    for _ in range(warmup):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < iters:
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e6)
        if time.perf_counter() - start >= max_seconds:
            break
    return times


def load_eager(model_dir: str):
    """The model directory's task wrapper around its architecture (manifest.json),
    as export.py built the programs; a directory without a v2 manifest is MiniLM's
    sentence embedder."""
    import transformers
    from runlens_export.tasks import TASKS

    manifest_path = os.path.join(model_dir, "manifest.json")
    manifest = {}
    if os.path.isfile(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    task = TASKS[manifest.get("task", "feature-extraction")]
    cls = getattr(transformers, manifest.get("architecture", "AutoModel"))
    model = cls.from_pretrained(model_dir, attn_implementation="eager")
    return task.wrap(model).eval()


def onnx_session(path: str, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def main() -> int:
    job = json.load(sys.stdin)
    threads = int(job["threads"])
    torch.set_num_threads(threads)
    out = {"versions": {}, "loads": [], "results": [], "interrupted": False}
    out["versions"]["python"] = platform.python_version()
    out["versions"]["torch"] = torch.__version__
    try:
        import transformers

        out["versions"]["transformers"] = transformers.__version__
    except ImportError:
        pass
    for package in ("executorch", "onnxruntime"):
        try:
            from importlib.metadata import version

            out["versions"][package] = version(package)
        except Exception:  # noqa: BLE001
            pass

    inputs = [
        (int(i["seq_len"]), torch.tensor([i["ids"]], dtype=torch.long), torch.tensor([i["mask"]], dtype=torch.long))
        for i in job["inputs"]
    ]
    warmup, iters, budget = int(job["warmup"]), int(job["iters"]), float(job["max_seconds"])
    try:
        for backend in job["backends"]:
            t0 = time.perf_counter()
            if backend == "eager":
                model = load_eager(job["model_dir"])

                def make(ids, mask, model=model):
                    def fn():
                        with torch.inference_mode():
                            return model(ids, mask)

                    return fn

            elif backend in job.get("onnx", {}):
                session = onnx_session(job["onnx"][backend], threads)
                takes = {i.name for i in session.get_inputs()}

                def make(ids, mask, session=session, takes=takes):
                    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
                    if "token_type_ids" in takes:
                        feeds["token_type_ids"] = (ids * 0).numpy()
                    return lambda: session.run(None, feeds)

            else:
                from executorch.extension.pybindings import portable_lib

                portable_lib._unsafe_reset_threadpool(threads)
                module = portable_lib._load_for_executorch(job["pte"][backend])

                pad_to = int(job.get("pad_to", {}).get(backend, 0))
                ids_only = backend in job.get("ids_only", [])

                def make(ids, mask, module=module, pad_to=pad_to, ids_only=ids_only):
                    if pad_to > ids.shape[1]:
                        extra = pad_to - ids.shape[1]
                        ids = torch.nn.functional.pad(ids, (0, extra), value=0)
                        mask = torch.nn.functional.pad(mask, (0, extra), value=0)
                    if ids_only:
                        return lambda: module.forward((ids,))
                    return lambda: module.forward((ids, mask))

            name = f"python-{backend}"
            out["loads"].append({"backend": name, "load_ms": (time.perf_counter() - t0) * 1e3, "rss_mb": rss_mb()})
            for seq_len, ids, mask in inputs:
                log(f"{name} seq {seq_len}")
                # The portable path is slow (about 1 s at 128 tokens): one warm-up at most, as in src/bench.
                w = min(warmup, 1) if backend == "portable" else warmup
                times = timed(make(ids, mask), w, iters, budget)
                out["results"].append({"backend": name, "seq_len": seq_len, "times_ms": times})
    except KeyboardInterrupt:
        out["interrupted"] = True
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
