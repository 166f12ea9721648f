"""Feeds for a corpus model at one shape, from the manifest's input kinds:
ids in the vocabulary's range, masks of ones, images, audio."""
import numpy as np


def dims_at(dims, shape):
    return tuple(shape[d] if isinstance(d, str) else d for d in dims)


def _one(kind, size, rng, dtype):
    if kind.startswith("ids:"):
        return rng.integers(0, int(kind[4:]), size).astype(dtype or np.int64)
    if kind.startswith("i64:"):
        return np.array(int(kind[4:]), np.int64)
    if kind in ("ones", "zeros"):
        return (np.ones if kind == "ones" else np.zeros)(size, dtype or np.int64)
    if kind == "audio":  # a tone with noise, as a microphone gives
        t = np.arange(size[-1]) / 16000.0
        x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(size)
        return x.astype(np.float32)
    if kind in ("image", "float"):
        return rng.standard_normal(size).astype(np.float32)
    raise ValueError(f"unknown input kind {kind!r}")


def feeds(entry, shape, seed=0, types=None):
    """{input name: array}; types maps input names to the model's dtypes
    (numpy), for the kinds whose dtype the model decides."""
    rng = np.random.default_rng(seed)
    types = types or {}
    return {name: _one(kind, dims_at(dims, shape), rng, types.get(name)) for name, kind, dims in entry["inputs"]}
