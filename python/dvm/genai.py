"""dvm.genai: ONNX Runtime GenAI's Python API over dvm's generator.

    import dvm.genai as og                       # in place of onnxruntime_genai
    model = og.Model("phi3-folder")              # genai_config.json, model.onnx, tokenizer.json
    tokenizer = og.Tokenizer(model)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=64)
    generator = og.Generator(model, params)
    generator.append_tokens(tokenizer.encode("The first 4 digits of pi are"))
    while not generator.is_done():
        generator.generate_next_token()
    print(tokenizer.decode(generator.get_sequence(0)))

A model folder as ONNX Runtime GenAI's model builder writes it is compiled
once (cached as InferenceSession's models are) and run by libdvm's
generator (dvm/generate.h), which owns the KV cache and chooses tokens.
The tokenizer is the `tokenizers` package reading the folder's
tokenizer.json. What ONNX Runtime GenAI offers and dvm does not raises
dvm.Error saying so. docs/python.md has the details."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from typing import Any, Dict, Iterable, List, Sequence, Union

import numpy as np

from . import _dvm
from ._dvm import Error
from ._session import _compiler_id, cached_compile

__all__ = ["Config", "Model", "Tokenizer", "TokenizerStream", "GeneratorParams", "Generator", "Tensor", "Images",
           "Audios", "Error", "is_cuda_available", "is_dml_available"]

_CONFIG = "genai_config.json"

# ONNX Runtime GenAI's search options; the generator reads all but these
# two from genai_config.json's "search" object.
_SEARCH_OPTIONS = {"batch_size", "chunk_size", "diversity_penalty", "do_sample", "early_stopping",
                   "length_penalty", "max_length", "min_length", "no_repeat_ngram_size", "num_beams",
                   "num_return_sequences", "past_present_share_buffer", "random_seed", "repetition_penalty",
                   "temperature", "top_k", "top_p"}
_NOT_IN_CONFIG = {"batch_size", "chunk_size"}


def _unsupported(what: str) -> Error:
    return Error(f"dvm.genai: {what} is not supported")


def is_cuda_available() -> bool:
    """False: dvm's generator runs the model on the CPU."""
    return False


def is_dml_available() -> bool:
    return False


def _merge(dst: Dict[str, Any], src: Dict[str, Any]) -> None:
    """Overlays src on dst: objects merge key by key, other values replace."""
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)


class _ConfigFile:
    """A config written as genai_config.json into a private folder, for
    libdvm to read (its messages name the file and the field)."""

    def __init__(self, config: Dict[str, Any]) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="dvm-genai-")
        self.path = os.path.join(self._dir.name, _CONFIG)
        with open(self.path, "w") as f:
            json.dump(config, f)

    def __enter__(self) -> "_ConfigFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._dir.cleanup()


class Config:
    """og.Config(path): the folder's genai_config.json, which overlay()
    changes before a Model is made from it."""

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self.path = os.fspath(path)
        file = os.path.join(self.path, _CONFIG)
        try:
            with open(file) as f:
                self._json = json.load(f)
        except OSError as e:
            raise Error(f"Error opening {file}: {e.strerror}") from None
        except ValueError as e:
            raise Error(f"{file}: not JSON: {e}") from None
        if not isinstance(self._json, dict):
            raise Error(f"{file}: must be a JSON object")

    def overlay(self, json_text: str) -> None:
        """Merges a JSON object into the config (objects key by key)."""
        try:
            o = json.loads(json_text)
        except ValueError as e:
            raise Error(f"Config.overlay: not JSON: {e}") from None
        if not isinstance(o, dict):
            raise Error("Config.overlay: expected a JSON object")
        _merge(self._json, o)

    def clear_providers(self) -> None:
        """The CPU, the only place dvm's generator runs: nothing to clear."""
        so = self._json.get("model", {}).get("decoder", {}).get("session_options")
        if isinstance(so, dict):
            so["provider_options"] = []

    def append_provider(self, provider: str) -> None:
        if provider.lower() not in ("cpu", "cpuexecutionprovider"):
            raise _unsupported(f"provider {provider!r} (the generator runs on the CPU)")

    def set_provider_option(self, provider: str, key: str, value: str) -> None:
        raise _unsupported(f"provider option {provider}.{key}")

    def _threads(self) -> int:
        so = self._json.get("model", {}).get("decoder", {}).get("session_options", {})
        n = so.get("intra_op_num_threads", 0) if isinstance(so, dict) else 0
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise Error(f"{_CONFIG}: model.decoder.session_options.intra_op_num_threads: "
                        f"expected a count (0: all cores), got {n!r}")
        return n


def _model_key(folder: str, filename: str, logits: str) -> str:
    """What the compiled module depends on: the ONNX file's bytes, its
    external data files (by size and modification time: hashing gigabytes
    of weights at every load would cost more than it saves) and the
    compiler."""
    h = hashlib.sha256()
    with open(os.path.join(folder, filename), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    for name in sorted(os.listdir(folder)):
        if name != filename and name.startswith(filename):
            st = os.stat(os.path.join(folder, name))
            h.update(f"\0{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(b"\0genai\0cpu\0last_position=" + logits.encode() + b"\0" + _compiler_id())
    return h.hexdigest()


class Model:
    """og.Model(path_or_config): the folder's decoder compiled once (the
    .dvmb cached under DVM_CACHE_DIR, default ~/.cache/dvm, as
    InferenceSession's) and loaded."""

    def __init__(self, config: Union[str, "os.PathLike[str]", Config]) -> None:
        self.config = copy.deepcopy(config) if isinstance(config, Config) else Config(config)
        self.path = self.config.path
        self._threads = self.config._threads()
        with _ConfigFile(_generator_json(self.config._json, self.config._json.get("search", {}))) as cf:
            filename, logits = _dvm.generator_model_file(cf.path)
        onnx_path = os.path.join(self.path, filename)
        if not os.path.isfile(onnx_path):
            raise Error(f"{onnx_path}: model.decoder.filename names no file in the model folder")
        # the generator reads the logits after each sequence's last token
        # only; the weights stay in the folder's data files, referred to
        self._module = cached_compile(onnx_path, _model_key(self.path, filename, logits), "cpu",
                                      data_dir=self.path, last_position=logits)

    @property
    def type(self) -> str:
        return str(self.config._json.get("model", {}).get("type", ""))

    @property
    def device_type(self) -> str:
        return "cpu"

    def create_multimodal_processor(self) -> Any:
        raise _unsupported("a multimodal processor")


class Images:
    """Multimodal input: not supported (Images.open raises dvm.Error)."""

    @staticmethod
    def open(*paths: str) -> "Images":
        raise _unsupported("images (multimodal models)")


class Audios:
    """Multimodal input: not supported (Audios.open raises dvm.Error)."""

    @staticmethod
    def open(*paths: str) -> "Audios":
        raise _unsupported("audio (multimodal models)")


class Tensor:
    """What ONNX Runtime GenAI's Tensor offers for token batches: a 2-D
    int32 array, right-padded with pad_token_id (Tokenizer.encode_batch)."""

    def __init__(self, array: np.ndarray) -> None:
        self._a = array

    def as_numpy(self) -> np.ndarray:
        return self._a

    def shape(self) -> List[int]:
        return list(self._a.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._a if dtype is None else self._a.astype(dtype)


def _eos_ids(model_json: Dict[str, Any]) -> List[int]:
    e = model_json.get("eos_token_id", [])
    return list(e) if isinstance(e, list) else [e]


class Tokenizer:
    """og.Tokenizer(model): the model folder's tokenizer.json through the
    `tokenizers` package (pip install tokenizers)."""

    def __init__(self, model: Model) -> None:
        try:
            import tokenizers
        except ImportError:
            raise Error("dvm.genai.Tokenizer needs the tokenizers package: pip install tokenizers") from None
        file = os.path.join(model.path, "tokenizer.json")
        if not os.path.isfile(file):
            raise Error(f"{file}: no such file (the model folder's tokenizer)")
        try:
            self._tok = tokenizers.Tokenizer.from_file(file)
        except Exception as e:  # tokenizers raises its own Exception subclass
            raise Error(f"{file}: {e}") from None
        self._path = model.path
        m = model.config._json.get("model", {})
        self.eos_token_ids = _eos_ids(m)
        self.bos_token_id = m.get("bos_token_id", -1)
        self.pad_token_id = m.get("pad_token_id", self.eos_token_ids[0] if self.eos_token_ids else 0)

    def encode(self, text: str) -> np.ndarray:
        """The ids of text, with the special tokens tokenizer.json adds."""
        return np.array(self._tok.encode(text).ids, dtype=np.int32)

    def encode_batch(self, texts: Sequence[str]) -> Tensor:
        """A [len(texts), longest] int32 Tensor, each row right-padded with
        pad_token_id (Generator.append_tokens removes the padding)."""
        rows = [e.ids for e in self._tok.encode_batch(list(texts))]
        out = np.full((len(rows), max(map(len, rows), default=0)), self.pad_token_id, dtype=np.int32)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return Tensor(out)

    def decode(self, tokens: Iterable[int]) -> str:
        """Text of the ids, special tokens left out."""
        return self._tok.decode(_ids(tokens))

    def decode_batch(self, tokens: Any) -> List[str]:
        return [self.decode(r) for r in np.asarray(tokens)]

    def to_token_id(self, token: str) -> int:
        i = self._tok.token_to_id(token)
        if i is None:
            raise Error(f"Tokenizer.to_token_id: {token!r} is not a token of the vocabulary")
        return i

    def create_stream(self) -> "TokenizerStream":
        return TokenizerStream(self)

    def apply_chat_template(self, messages: Union[str, List[Dict[str, Any]]], *, template_str: str = None,
                            tools: str = None, add_generation_prompt: bool = True) -> str:
        """The prompt for chat messages (GenAI's JSON string of
        [{"role", "content"}, ...], or the list itself): template_str, else
        the model folder's chat template, rendered as Hugging Face
        transformers renders it (docs/python.md#chat-templates)."""
        return _chat_prompt(self._path, messages, template_str, tools, add_generation_prompt)


def _ids(tokens: Iterable[int]) -> List[int]:
    a = np.asarray(tokens)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise Error(f"expected a 1-D sequence of token ids, got shape {a.shape} of {a.dtype}")
    return [int(t) for t in a]


def _chat_template(folder: str, tools: Any) -> tuple:
    """The folder's chat template (None if it has none) and special tokens:
    tokenizer_config.json's chat_template (a string, or named templates:
    "tool_use" when there are tools and it has one, else "default"), else
    chat_template.jinja."""
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    try:
        cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.isfile(cfg_path) else {}
    except (OSError, ValueError) as e:
        raise Error(f"{cfg_path}: {e}") from None
    if not isinstance(cfg, dict):
        raise Error(f"{cfg_path}: not a JSON object")
    tokens = {}
    for k, v in cfg.items():
        v = v.get("content") if isinstance(v, dict) else v  # an AddedToken's form
        if k.endswith("_token") and isinstance(v, str):
            tokens[k] = v
    t = cfg.get("chat_template")
    if isinstance(t, list):
        named = {e.get("name"): e.get("template") for e in t if isinstance(e, dict)}
        t = named.get("tool_use") if tools and "tool_use" in named else named.get("default")
        if not isinstance(t, str):
            raise Error(f"{cfg_path}: chat_template lists no string template named \"default\"")
    elif t is not None and not isinstance(t, str):
        raise Error(f"{cfg_path}: chat_template is not a string")
    jinja_path = os.path.join(folder, "chat_template.jinja")
    if t is None and os.path.isfile(jinja_path):
        t = open(jinja_path, encoding="utf-8").read()
    return t, tokens


def _chat_json(what: str, value: Any) -> Any:
    if isinstance(value, (bytes, str)):
        try:
            return json.loads(value)
        except ValueError as e:
            raise Error(f"apply_chat_template: {what} is not JSON: {e}") from None
    return value


def _chat_prompt(folder: str, messages: Any, template_str: Any, tools: Any, add_generation_prompt: bool) -> str:
    """Jinja2 in its immutable sandbox with transformers' settings
    (trim_blocks, lstrip_blocks, the loop controls, raise_exception,
    strftime_now and a tojson that keeps non-ASCII), so that a template
    renders the prompt its model was trained on."""
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise Error("apply_chat_template needs the jinja2 package: pip install jinja2") from None
    import datetime

    msgs, tools = _chat_json("messages", messages), _chat_json("tools", tools) if tools else None
    if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
        raise Error("apply_chat_template: messages must be a JSON list of objects ({\"role\": ..., \"content\": ...})")
    source, tokens = _chat_template(folder, tools)
    source = template_str or source
    if source is None:
        raise Error(f"{folder}: no chat template (tokenizer_config.json has no chat_template and there is no "
                    "chat_template.jinja); pass template_str")

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    try:
        return env.from_string(source).render(messages=msgs, tools=tools, add_generation_prompt=add_generation_prompt,
                                              **tokens)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise Error(f"chat template, line {e.lineno}: {e.message}") from None
    except jinja2.exceptions.TemplateError as e:
        raise Error(f"chat template: {e}") from None


class TokenizerStream:
    """Tokenizer.create_stream(): decode(token) gives the text the token
    adds to what came before, "" while its bytes do not yet end a
    character. The text is a difference of two decodes of a few tokens
    before it, so that decoders which treat a word's first piece
    differently (SentencePiece's leading space) read it in context."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok = tokenizer._tok
        self._ids: List[int] = []
        self._prefix = 0  # decoding starts here
        self._read = 0    # text up to here has been given out

    def decode(self, token: int) -> str:
        self._ids.append(int(token))
        before = self._tok.decode(self._ids[self._prefix:self._read])
        now = self._tok.decode(self._ids[self._prefix:])
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return ""  # an incomplete character, or a token that writes nothing
        self._prefix, self._read = self._read, len(self._ids)
        return now[len(before):]


class GeneratorParams:
    """og.GeneratorParams(model): the search options of a Generator,
    starting from the model's genai_config.json."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._search: Dict[str, Any] = dict(model.config._json.get("search", {}))

    def set_search_options(self, **options: Any) -> None:
        """ONNX Runtime GenAI's names: batch_size, max_length, min_length,
        do_sample, top_k, top_p, temperature, repetition_penalty,
        random_seed, and the beam search options, which must keep the
        values that mean no beam search. An unknown name or a value the
        generator refuses raises dvm.Error."""
        search = dict(self._search)
        for name, value in options.items():
            if name not in _SEARCH_OPTIONS:
                raise Error(f'Unknown value "{name}"')
            if not isinstance(value, (bool, int, float)):
                raise Error(f"Unknown search option type, can be float/bool/int: {name}")
            search[name] = value
        self._check(search)
        self._search = search

    def get_search_options(self) -> Dict[str, Any]:
        return dict(self._search)

    def set_guidance(self, *args: Any, **kwargs: Any) -> None:
        raise _unsupported("guidance (constrained decoding)")

    def _check(self, search: Dict[str, Any]) -> None:
        with _ConfigFile(self._config(search)) as cf:
            _dvm.generator_model_file(cf.path)  # raises naming the field

    def _config(self, search: Dict[str, Any]) -> Dict[str, Any]:
        return _generator_json(self._model.config._json, search)


def _generator_json(config: Dict[str, Any], search: Dict[str, Any]) -> Dict[str, Any]:
    """config with these search options, as libdvm's generator reads it:
    without batch_size (an option of its own) and chunk_size."""
    batch = search.get("batch_size", 1)
    if isinstance(batch, bool) or not isinstance(batch, (int, float)) or batch != int(batch) or batch < 1:
        raise Error(f"search option batch_size: expected a count of 1 or more, got {batch!r}")
    if search.get("chunk_size", 0):
        raise _unsupported(f"chunk_size {search['chunk_size']} (prefill in chunks: dvm runs each prompt whole)")
    cfg = copy.deepcopy(config)
    cfg["search"] = {k: v for k, v in search.items() if k not in _NOT_IN_CONFIG}
    # whole numbers given as floats (as get_search_options' values are) are the ints the file holds
    for k, v in cfg["search"].items():
        if isinstance(v, float) and v.is_integer() and k not in ("top_p", "temperature", "repetition_penalty"):
            cfg["search"][k] = int(v)
    return cfg


class Generator:
    """og.Generator(model, params): sequences of the batch, their KV cache
    and the choice of each next token, in libdvm's generator."""

    def __init__(self, model: Model, params: GeneratorParams) -> None:
        self._model = model
        self._pad = model.config._json.get("model", {}).get("pad_token_id", -1)
        self._eos = _eos_ids(model.config._json.get("model", {}))
        search = params._search
        with _ConfigFile(params._config(search)) as cf:
            self._g = _dvm.Generator(model._module, cf.path, batch_size=int(search.get("batch_size", 1)),
                                     threads=model._threads)
        self._batch = self._g.batch_size
        self._next = np.zeros(self._batch, dtype=np.int32)
        # the generator's logits are its choice's work space: each row as the model gave it, kept here
        self._logits = np.zeros((self._batch, self._g.vocab_size), dtype=np.float32)
        self._ran = False
        self._appended = False  # tokens appended that the model has not run on

    def append_tokens(self, tokens: Any) -> None:
        """Appends a prompt (or more tokens) to each sequence: a 1-D array
        for a batch of one, else [batch, n] (Tokenizer.encode_batch's,
        whose right padding, pad_token_id, is removed; a flat array of
        batch * n is read as [batch, n]). The model runs at the next
        generate_next_token or get_logits."""
        a = np.asarray(tokens.as_numpy() if isinstance(tokens, Tensor) else tokens)
        if a.size and a.dtype.kind not in "iu":
            raise _dvm.InvalidInput(f"append_tokens: expected integer token ids, got {a.dtype}")
        if a.size and (a.min() < 0 or a.max() > np.iinfo(np.int32).max):
            bad = a.min() if a.min() < 0 else a.max()
            raise _dvm.InvalidInput(f"append_tokens: token {bad} is outside the vocabulary (0 to "
                                    f"{self._g.vocab_size - 1})")
        a = a.astype(np.int32)
        if a.ndim == 1 and self._batch > 1:
            if a.size % self._batch:
                raise _dvm.InvalidInput(f"append_tokens: {a.size} tokens do not divide into a batch of {self._batch}")
            a = a.reshape(self._batch, -1)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2 or a.shape[0] != self._batch:
            raise _dvm.InvalidInput(f"append_tokens: expected [{self._batch}, n] tokens, got shape {list(a.shape)}")
        rows = [_unpadded(r, self._pad) if self._batch > 1 else r for r in a]
        self._g.append(rows)
        self._appended = True

    def generate_next_token(self) -> None:
        """Runs the model if needed and appends each unfinished sequence's
        next token (an EOS ends a sequence without being appended)."""
        before = [(self._len(b), self._g.seq_done(b)) for b in range(self._batch)]
        self._compute()
        self._g.next()
        for b, (n, done) in enumerate(before):
            if self._len(b) > n:
                self._next[b] = self._g.sequence(b)[-1]
            else:  # ended on an EOS here (the first of the config's: which one is not kept), or done before
                self._next[b] = self._eos[0] if not done and self._eos else self._pad

    def _compute(self) -> None:
        """Runs the model on what was appended, keeping each new row of logits."""
        self._g.compute_logits()
        for b in range(self._batch):
            row = self._g.logits(b)
            if row is not None:
                self._logits[b] = row
                self._ran = True
        self._appended = False

    def _len(self, b: int) -> int:
        return len(self._g.sequence(b))

    def is_done(self) -> bool:
        return self._g.done()

    def get_next_tokens(self) -> np.ndarray:
        """The token each sequence took at the last generate_next_token."""
        return self._next.copy()

    def get_sequence(self, index: int) -> np.ndarray:
        """Sequence index's tokens, prompt included, without padding."""
        return self._g.sequence(index)

    def get_logits(self) -> np.ndarray:
        """[batch, 1, vocab] float32, as ONNX Runtime GenAI's: after
        append_tokens, the logits after the appended tokens (the model runs
        on them now); after generate_next_token, those its tokens were
        chosen from."""
        if self._appended:
            self._compute()
        if not self._ran:
            raise Error("Generator.get_logits: no tokens yet (append_tokens first)")
        return self._logits[:, None, :].copy()

    def token_count(self) -> int:
        """Tokens in the longest sequence, prompt included."""
        return max(self._len(b) for b in range(self._batch))

    def _stats(self) -> Dict[str, Union[int, str]]:
        return self._g.stats()

    def get_output(self, name: str) -> Any:
        raise _unsupported(f"get_output({name!r}) (get_logits gives the last token's logits)")

    def get_input(self, name: str) -> Any:
        raise _unsupported(f"get_input({name!r})")

    def set_inputs(self, *args: Any) -> None:
        raise _unsupported("set_inputs")

    def set_model_input(self, *args: Any) -> None:
        raise _unsupported("set_model_input")

    def set_logits(self, *args: Any) -> None:
        raise _unsupported("set_logits")

    def rewind_to(self, length: int) -> None:
        raise _unsupported("rewind_to")

    def set_active_adapter(self, *args: Any) -> None:
        raise _unsupported("adapters (LoRA)")

    def set_runtime_option(self, key: str, value: str) -> None:
        raise _unsupported(f"runtime option {key!r}")


def _unpadded(row: np.ndarray, pad: int) -> np.ndarray:
    """row without its trailing pad tokens (encode_batch's right padding)."""
    n = len(row)
    while n and row[n - 1] == pad:
        n -= 1
    return row[:n]
