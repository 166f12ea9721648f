"""Tiny decoder LLM folders in ONNX Runtime GenAI's builder form (model.onnx,
its external data file, genai_config.json), made with onnx.helper at test
time: random weights, 2 layers by default.

attention="gqa" is the builder's own form: SimplifiedLayerNormalization,
SkipSimplifiedLayerNormalization and com.microsoft GroupQueryAttention
(rotary inside, seqlens_k and total_sequence_length computed from
attention_mask), no position_ids input. attention="scatter" computes the
same kind of decoder with standard ops: ONNX TensorScatter writes the new
keys and values into past at each row's past length (in place when present
is past's buffer), and a position_ids input masks the keys."""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


class _Graph:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def w(self, name, *shape, scale=None, value=None):
        if value is None:
            scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
            value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type, inputs, nout=1, domain="", omit=(), **attrs):
        """Outputs whose index is in omit are left unnamed ("")."""
        self.n += 1
        outs = ["" if i in omit else f"{op_type}_{self.n}_{i}" for i in range(nout)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self.n}", domain=domain, **attrs))
        return outs[0] if nout == 1 else outs

    def c(self, value, dtype=np.int64):
        self.n += 1
        return self.w(f"const_{self.n}", value=np.array(value, dtype=dtype))


def _rms(g, x, w, eps):  # standard ops
    ms = g.op("ReduceMean", [g.op("Mul", [x, x]), g.c([-1])], keepdims=1)
    return g.op("Mul", [g.op("Div", [x, g.op("Sqrt", [g.op("Add", [ms, g.c(eps, np.float32)])])]), w])


def _heads(g, x, n, hs):  # [B, S, n*hs] -> [B, n, S, hs]
    return g.op("Transpose", [g.op("Reshape", [x, g.c([0, 0, n, hs])])], perm=[0, 2, 1, 3])


def make(folder, *, attention="scatter", layers=2, hidden=64, heads=4, kv_heads=2, vocab=97, context=256,
         max_length=64, tied=False, seed=0, eos=None, search=None):
    """Writes the folder; returns the config dict."""
    rng = np.random.default_rng(seed)
    g = _Graph(rng)
    hs = hidden // heads
    eps = 1e-5
    if attention == "scatter":
        kv_heads = heads  # no head grouping in the standard-op form
    embed = g.w("model.embed_tokens.weight", vocab, hidden, scale=1.0)
    x = g.op("Gather", [embed, "input_ids"])
    if attention == "scatter":
        x = g.op("Add", [x, g.op("Gather", [g.w("model.embed_positions.weight", context, hidden, scale=0.5),
                                            "position_ids"])])
        seq = g.op("Shape", ["input_ids"], start=1, end=2)
        write_at = g.op("Sub", [g.op("ReduceSum", ["attention_mask", g.c([1])], keepdims=0), seq])
        # key j is visible to the query at position p when j <= p
        maxlen = g.op("Squeeze", [g.op("Shape", ["past_key_values.0.key"], start=2, end=3)])
        keys = g.op("Range", [g.c(0), maxlen, g.c(1)])
        pos = g.op("Unsqueeze", ["position_ids", g.c([1, 3])])
        visible = g.op("LessOrEqual", [keys, pos])
    else:
        seqlens = g.op("Cast", [g.op("Sub", [g.op("ReduceSum", ["attention_mask", g.c([1])], keepdims=0), g.c(1)])],
                       to=I32)
        total = g.op("Cast", [g.op("Gather", [g.op("Shape", ["attention_mask"]), g.c(1)], axis=0)], to=I32)
        inv = 1.0 / (10000 ** (np.arange(0, hs, 2) / hs))
        ang = np.outer(np.arange(context), inv)
        cos = g.w("cos_cache", value=np.cos(ang).astype(np.float32))
        sin = g.w("sin_cache", value=np.sin(ang).astype(np.float32))
    inputs = [helper.make_tensor_value_info("input_ids", I64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", I64, ["batch_size", "total_sequence_length"])]
    if attention == "scatter":
        inputs.append(helper.make_tensor_value_info("position_ids", I64, ["batch_size", "sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", F32, ["batch_size", "sequence_length", vocab])]
    skip = None  # the residual stream, when a SkipSimplifiedLayerNormalization carries it
    for l in range(layers):
        p = f"model.layers.{l}"
        pk, pv, ck, cv = f"past_key_values.{l}.key", f"past_key_values.{l}.value", f"present.{l}.key", f"present.{l}.value"
        for name in (pk, pv):
            inputs.append(helper.make_tensor_value_info(name, F32, ["batch_size", kv_heads, "past_sequence_length", hs]))
        for name in (ck, cv):
            outputs.append(helper.make_tensor_value_info(name, F32, ["batch_size", kv_heads, "total_sequence_length", hs]))
        ln1 = g.w(f"{p}.input_layernorm.weight", value=(1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))
        if attention == "scatter":
            y = _rms(g, x, ln1, eps)
        elif skip is None:
            y = g.op("SimplifiedLayerNormalization", [x, ln1], axis=-1, epsilon=eps, stash_type=1)
            skip = x
        else:
            y, _, _, skip = g.op("SkipSimplifiedLayerNormalization", [x, skip, ln1], nout=4, domain="com.microsoft", omit=(1, 2),
                                 epsilon=eps)
        if attention == "scatter":
            q = g.op("MatMul", [y, g.w(f"{p}.attn.q_proj.weight", hidden, heads * hs)])
            k = g.op("MatMul", [y, g.w(f"{p}.attn.k_proj.weight", hidden, kv_heads * hs)])
            v = g.op("MatMul", [y, g.w(f"{p}.attn.v_proj.weight", hidden, kv_heads * hs)])
            g.nodes.append(helper.make_node("TensorScatter", [pk, _heads(g, k, kv_heads, hs), write_at], [ck], axis=2))
            g.nodes.append(helper.make_node("TensorScatter", [pv, _heads(g, v, kv_heads, hs), write_at], [cv], axis=2))
            s = g.op("Mul", [g.op("MatMul", [_heads(g, q, heads, hs), g.op("Transpose", [ck], perm=[0, 1, 3, 2])]),
                             g.c(1.0 / np.sqrt(hs), np.float32)])
            prob = g.op("Softmax", [g.op("Where", [visible, s, g.c(-1e9, np.float32)])], axis=-1)
            a = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [prob, cv])], perm=[0, 2, 1, 3]), g.c([0, 0, hidden])])
        else:
            a = f"attn_{l}"
            # the builder's packed form: one MatMul makes q, k and v, GroupQueryAttention splits them
            qkv = g.op("MatMul", [y, g.w(f"{p}.attn.qkv_proj.weight", hidden, (heads + 2 * kv_heads) * hs)])
            g.nodes.append(helper.make_node(
                "GroupQueryAttention", [qkv, "", "", pk, pv, seqlens, total, cos, sin], [a, ck, cv], name=f"gqa_{l}",
                domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads, do_rotary=1))
        o = g.op("MatMul", [a, g.w(f"{p}.attn.o_proj.weight", heads * hs, hidden)])
        ln2 = g.w(f"{p}.post_attention_layernorm.weight", value=(1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))
        if attention == "scatter":
            x = g.op("Add", [x, o])
            y = _rms(g, x, ln2, eps)
        else:
            y, _, _, skip = g.op("SkipSimplifiedLayerNormalization", [o, skip, ln2], nout=4, domain="com.microsoft", omit=(1, 2),
                                 epsilon=eps)
        gate = g.op("MatMul", [y, g.w(f"{p}.mlp.gate_proj.weight", hidden, 2 * hidden)])
        up = g.op("MatMul", [y, g.w(f"{p}.mlp.up_proj.weight", hidden, 2 * hidden)])
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
        down = g.op("MatMul", [act, g.w(f"{p}.mlp.down_proj.weight", 2 * hidden, hidden)])
        if attention == "scatter":
            x = g.op("Add", [x, down])
        else:
            x = down
    lnf = g.w("model.norm.weight", value=np.ones(hidden, np.float32))
    if attention == "scatter":
        y = _rms(g, x, lnf, eps)
    else:
        y, _, _, _ = g.op("SkipSimplifiedLayerNormalization", [x, skip, lnf], nout=4, domain="com.microsoft",
                          omit=(1, 2, 3), epsilon=eps)
    head = g.op("Transpose", [embed], perm=[1, 0]) if tied else g.w("lm_head.weight", hidden, vocab)
    g.nodes.append(helper.make_node("MatMul", [y, head], ["logits"], name="lm_head"))
    graph = helper.make_graph(g.nodes, "decoder", inputs, outputs, g.inits)
    opsets = [helper.make_opsetid("", 24), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx.data", size_threshold=1024)
    config = {
        "model": {
            "bos_token_id": 1, "context_length": context,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": "model.onnx", "head_size": hs, "hidden_size": hidden,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
                "num_attention_heads": heads, "num_hidden_layers": layers, "num_key_value_heads": kv_heads},
            "eos_token_id": eos if eos is not None else vocab - 1, "pad_token_id": 0, "type": "llama",
            "vocab_size": vocab},
        "search": {"diversity_penalty": 0.0, "do_sample": False, "early_stopping": True, "length_penalty": 1.0,
                   "max_length": max_length, "min_length": 0, "no_repeat_ngram_size": 0, "num_beams": 1,
                   "num_return_sequences": 1, "past_present_share_buffer": True, "repetition_penalty": 1.0,
                   "temperature": 1.0, "top_k": 50, "top_p": 1.0},
    }
    if attention == "scatter":
        config["model"]["decoder"]["inputs"]["position_ids"] = "position_ids"
    config["search"].update(search or {})
    with open(os.path.join(folder, "genai_config.json"), "w") as f:
        json.dump(config, f, indent=4)
    return config
