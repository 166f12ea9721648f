"""Exports small models the way PyTorch exports them, for tests of shape
inference, fusion and memory planning on graphs nobody here wrote.

Run with Debian's interpreter (python3-torch 1.13 is installed for it):
    /usr/bin/python3 tests/exported/export_models.py OUTDIR [--size tiny|base]

Every model has dynamic axes. The modules follow the code of the popular
implementations (Hugging Face's BERT and GPT-2, YOLOv5's Focus layer) in
the parts that decide what the exporter writes: the position_ids buffer
sliced by the sequence length, the extended attention mask, the causal mask
buffer, size() arithmetic in view/permute, LayerNorm and GELU decomposed at
opset 14, strided slicing with open ends.
"""
import argparse
import math
import os

import torch
from torch import nn


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split(self, x):  # as transformers' transpose_for_scores
        new_shape = x.size()[:-1] + (self.heads, self.dh)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        probs = torch.softmax(scores + ext_mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.heads * self.dh,))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.attn = BertSelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.inter = nn.Linear(hidden, inter)
        self.out = nn.Linear(inter, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)
        self.act = nn.GELU()

    def forward(self, x, ext_mask):
        x = self.ln1(self.attn_out(self.attn(x, ext_mask)) + x)
        return self.ln2(self.out(self.act(self.inter(x))) + x)


class Bert(nn.Module):
    def __init__(self, vocab, hidden, heads, inter, layers, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)))
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden, heads, inter) for _ in range(layers)])
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        seq = input_ids.size(1)
        pos = self.position_ids[:, :seq]
        x = self.ln(self.word(input_ids) + self.pos(pos) + self.token_type(token_type_ids))
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, ext)
        return x, torch.tanh(self.pool(x[:, 0]))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, max_pos):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.ln1 = nn.LayerNorm(hidden)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.proj = nn.Linear(4 * hidden, hidden)
        self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool)).view(1, 1, max_pos, max_pos))

    def heads_of(self, t):
        return t.view(t.size()[:-1] + (self.heads, self.dh)).permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln1(x)).split(x.size(-1), dim=2)
        q, k, v = self.heads_of(q), self.heads_of(k), self.heads_of(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
        qlen, klen = q.size(-2), k.size(-2)
        causal = self.bias[:, :, klen - qlen:klen, :klen]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        a = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        x = x + self.c_proj(a.view(a.size()[:-2] + (self.heads * self.dh,)))
        h = self.fc(self.ln2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.proj(h)


class GPT2(nn.Module):
    def __init__(self, vocab, hidden, heads, layers, max_pos=256):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList([GPT2Block(hidden, heads, max_pos) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        pos = torch.arange(0, input_ids.size(-1), dtype=torch.long).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


class ConvBnSiLU(nn.Module):
    def __init__(self, cin, cout, k=3, s=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return y * torch.sigmoid(y)


class Yolo(nn.Module):
    """YOLOv5-style: Focus slicing, strided convs, an upsample and a concat."""

    def __init__(self, w=16):
        super().__init__()
        self.focus = ConvBnSiLU(12, w, 3)
        self.down1 = ConvBnSiLU(w, 2 * w, 3, 2)
        self.down2 = ConvBnSiLU(2 * w, 4 * w, 3, 2)
        self.lat = ConvBnSiLU(4 * w, 2 * w, 1)
        self.head = nn.Conv2d(4 * w, 3 * 7, 1)

    def forward(self, x):
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
        a = self.down1(self.focus(x))
        b = self.lat(self.down2(a))
        up = nn.functional.interpolate(b, scale_factor=2.0, mode="nearest")
        y = self.head(torch.cat([up, a], 1))
        n, _, h, w = y.shape
        return y.view(n, 3, 7, h, w).permute(0, 1, 3, 4, 2).contiguous()


class Speech(nn.Module):
    """A conv front end over raw audio, as small keyword and VAD nets have,
    with a causal convolution trimmed by size arithmetic (Shape, Gather,
    Sub, Slice)."""

    def __init__(self, c=32):
        super().__init__()
        self.conv1 = nn.Conv1d(1, c, 400, stride=160, padding=200)
        self.bn1 = nn.BatchNorm1d(c)
        self.conv2 = nn.Conv1d(c, c, 3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(c, c, 3, padding=1)
        self.causal = nn.Conv1d(c, c, 3, padding=2)
        self.fc = nn.Linear(c, 2)

    def forward(self, audio):
        x = torch.relu(self.bn1(self.conv1(audio.unsqueeze(1))))
        x = torch.relu(self.conv2(x))
        x = x + torch.relu(self.conv3(x))
        # a causal convolution as TCNs write it: pad both sides, drop the end
        y = self.causal(x)
        x = x + y[:, :, : y.size(2) - 2]
        frames = self.fc(x.transpose(1, 2))
        return torch.softmax(frames, dim=-1), x.mean(dim=2)


class Lstm(nn.Module):
    """A recurrent tagger's core: a 2-layer bidirectional LSTM and a
    unidirectional one over its output (the exporter slices the stacked
    initial states per layer), returning the sequence and the states."""

    def __init__(self, cin=12, hidden=24, out=10):
        super().__init__()
        self.bi = nn.LSTM(cin, hidden, num_layers=2, bidirectional=True)
        self.uni = nn.LSTM(2 * hidden, out)

    def forward(self, x):
        y, (h, c) = self.bi(x)
        z, (h2, _) = self.uni(y)
        return z, h, c, h2


SIZES = {
    "tiny": dict(bert=dict(vocab=1000, hidden=64, heads=2, inter=256, layers=2),
                 gpt2=dict(vocab=1000, hidden=64, heads=2, layers=2), yolo=8),
    "base": dict(bert=dict(vocab=30522, hidden=768, heads=12, inter=3072, layers=12),
                 gpt2=dict(vocab=50257, hidden=768, heads=12, layers=6), yolo=32),
}


def export(model, args, path, inputs, outputs, axes):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=14, do_constant_folding=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--only", choices=["lstm"], help="export just this model")
    a = p.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    torch.manual_seed(0)
    s = SIZES[a.size]
    export(Lstm(), (torch.randn(5, 2, 12),), os.path.join(a.outdir, f"lstm_{a.size}.onnx"), ["x"],
           ["y", "h", "c", "h2"], {"x": {0: "seq", 1: "batch"}, "y": {0: "seq", 1: "batch"}})
    if a.only:
        return
    ids = torch.randint(0, 100, (2, 7))
    export(Bert(**s["bert"]), (ids, torch.ones(2, 7, dtype=torch.long), torch.zeros(2, 7, dtype=torch.long)),
           os.path.join(a.outdir, f"bert_{a.size}.onnx"), ["input_ids", "attention_mask", "token_type_ids"],
           ["last_hidden_state", "pooler_output"],
           {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "token_type_ids": {0: "batch", 1: "seq"}, "last_hidden_state": {0: "batch", 1: "seq"},
            "pooler_output": {0: "batch"}})
    export(GPT2(**s["gpt2"]), (ids,), os.path.join(a.outdir, f"gpt2_{a.size}.onnx"), ["input_ids"], ["logits"],
           {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
    export(Yolo(s["yolo"]), (torch.randn(1, 3, 64, 96),), os.path.join(a.outdir, f"yolo_{a.size}.onnx"),
           ["images"], ["output"], {"images": {0: "batch", 2: "height", 3: "width"}})
    export(Speech(), (torch.randn(2, 1600),), os.path.join(a.outdir, f"speech_{a.size}.onnx"), ["audio"],
           ["probs", "embedding"], {"audio": {0: "batch", 1: "samples"}})


if __name__ == "__main__":
    main()
