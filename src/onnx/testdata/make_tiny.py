"""Writes tiny.onnx, the ONNX reader's test file (src/onnx/tests.rs), with the
onnx package's own writer: an embedding table gathered by input_ids, times the
attention mask, as last_hidden_state. Run from this folder with the venv's python."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

table = numpy_helper.from_array(np.arange(50 * 4, dtype=np.float32).reshape(50, 4), "embeddings.word_embeddings.weight")
nodes = [
    helper.make_node("Gather", ["embeddings.word_embeddings.weight", "input_ids"], ["hidden"]),
    helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
    helper.make_node("Unsqueeze", ["mask_f", "axes"], ["mask_3d"]),
    helper.make_node("Mul", ["hidden", "mask_3d"], ["last_hidden_state"]),
]
axes = numpy_helper.from_array(np.array([2], dtype=np.int64), "axes")
graph = helper.make_graph(
    nodes,
    "tiny",
    [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
    ],
    [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", 4])],
    [table, axes],
)
model = helper.make_model(graph, producer_name="runlens-test", producer_version="1", opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, "tiny.onnx")
