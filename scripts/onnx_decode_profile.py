"""Where a decoder's step goes in ONNX Runtime, until `runlens profile` reads a decoder's
file (docs/onnxruntime.md): ONNX Runtime's own profiler through its Python package, 2
intra-op threads, sequential execution (the column's session options); a 128-token prompt,
then N decode steps with the presents fed back as the pasts; node time summed per operator
over the decode runs, per step, beside the runs' own time and the wall clock.

    .venv/bin/python scripts/onnx_decode_profile.py DIR/model.int8.onnx 16

Written for runlens' SmolLM2 export (30 layers, 3 KV heads of 64); other decoders need
their geometry in LAYERS, KV_HEADS, HEAD_DIM.
"""
import collections, json, sys, tempfile, time
import numpy as np, onnxruntime as ort
path, steps = sys.argv[1], int(sys.argv[2])
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.enable_profiling = True; so.profile_file_prefix = tempfile.gettempdir() + "/runlens-onnx-decode"
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
LAYERS, KV_HEADS, HEAD_DIM = 30, 3, 64
feeds = {"input_ids": np.arange(1, 129)[None], "attention_mask": np.ones((1, 128), np.int64), "position_ids": np.arange(128)[None]}
for i in range(LAYERS):
    for kv in ("key", "value"): feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float32)
outs = [o.name for o in s.get_outputs()]
r = s.run(None, feeds); pos = 128
t0 = time.perf_counter()
for k in range(steps):
    f = {"input_ids": np.array([[int(r[0][0, -1].argmax())]]), "attention_mask": np.ones((1, pos + 1), np.int64), "position_ids": np.array([[pos]])}
    for j, n in enumerate(outs[1:]): f[n.replace("present", "past_key_values")] = r[j + 1]
    r = s.run(None, f); pos += 1
wall = (time.perf_counter() - t0) / steps * 1e3
prof = json.load(open(s.end_profiling()))
runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in prof if e.get("cat") == "Session" and e["name"] == "model_run")[1:]  # decode runs
per = collections.Counter(); n_nodes = collections.Counter()
for e in prof:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        if any(a <= e["ts"] < b for a, b in runs):
            op = e.get("args", {}).get("op_name", "?"); per[op] += e["dur"]; n_nodes[op] += 1
total = sum(per.values()) / len(runs) / 1e3
run_ms = np.median([(b - a) / 1e3 for a, b in runs])
print(f"{path}: wall {wall:.2f} ms/step, model_run median {run_ms:.2f} ms, node sum {total:.2f} ms/step, "
      f"{sum(n_nodes.values()) // len(runs)} node runs a step")
for op, us in per.most_common(10):
    print(f"  {op:28s} {us / len(runs) / 1e3:7.3f} ms/step  {n_nodes[op] // len(runs):4d} nodes")
