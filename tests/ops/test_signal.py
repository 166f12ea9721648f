"""Window functions, mel_weight_matrix, dft and stft (ops/cpu/signal.c)
against NumPy, through the whole stack."""
import numpy as np
import pytest

from dvmop import DvmError, run1

rng = np.random.default_rng(5)


def window_ref(kind, size, periodic):
    n = np.arange(size, dtype=np.float64)
    n1 = size if periodic else size - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "hann_window":
            return np.sin(np.pi * n / n1) ** 2
        if kind == "hamming_window":
            return 25 / 46 - 21 / 46 * np.cos(2 * np.pi * n / n1)
        return 0.42 - 0.5 * np.cos(2 * np.pi * n / n1) + 0.08 * np.cos(4 * np.pi * n / n1)


@pytest.mark.parametrize("kind", ["hann_window", "hamming_window", "blackman_window"])
@pytest.mark.parametrize("size", [0, 1, 2, 7, 10, 64])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_window(kind, size, periodic, dtype):
    got = run1(kind, [np.array(size, np.int64)], [periodic], shapefn="window", out_dtypes=[dtype])
    assert got.shape == (size,) and got.dtype == dtype
    np.testing.assert_allclose(got, window_ref(kind, size, periodic).astype(dtype), rtol=1e-6, atol=1e-7)


def mel_ref(mel, n, rate, lo, hi):
    """ONNX's reference (onnx/reference/ops/op_mel_weight_matrix.py)."""
    bins = n // 2 + 1
    f = np.arange(0, mel + 2)
    lo_mel = 2595 * np.log1p(np.float32(lo) / 700) / np.log(10)
    hi_mel = 2595 * np.log1p(np.float32(hi) / 700) / np.log(10)
    f = f * ((hi_mel - lo_mel) / (mel + 2)) + lo_mel
    f = ((n + 1) * (700 * np.expm1(f / 2595 * np.log(10)))) // rate
    f = f.astype(int)
    out = np.zeros((bins, mel))
    for i in range(mel):
        l, c, h = f[i], f[i + 1], f[i + 2]
        if c == l:
            out[c, i] = 1
        else:
            for j in range(l, c + 1):
                out[j, i] = (j - l) / (c - l)
        for j in range(c, h):
            out[j, i] = (h - j) / (h - c)
    return out


@pytest.mark.parametrize("mel,n,rate,lo,hi", [(8, 16, 8192, 0, 4096), (5, 32, 16000, 100, 7000), (1, 2, 100, 0, 50),
                                              (13, 64, 22050, 20, 8000), (0, 16, 8000, 0, 4000)])
def test_mel_weight_matrix(mel, n, rate, lo, hi):
    ins = [np.array(mel, np.int32), np.array(n, np.int32), np.array(rate, np.int32), np.array(lo, np.float32),
           np.array(hi, np.float32)]
    got = run1("mel_weight_matrix", ins, shapefn="mel_weight_matrix", out_dtypes=[np.float32])
    np.testing.assert_allclose(got, mel_ref(mel, n, rate, lo, hi), rtol=1e-6, atol=1e-7)


def to_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def dft_ref(x, n, axis, inverse, onesided):
    c = to_complex(x.astype(np.float64))
    ax = axis % x.ndim
    m = x.shape[ax]
    n = n or (2 * (m - 1) if inverse and onesided else m)
    if inverse and onesided:
        return np.fft.irfft(c, n=n, axis=ax)[..., None]
    r = np.fft.ifft(c, n=n, axis=ax) if inverse else np.fft.fft(c, n=n, axis=ax)
    if onesided and not inverse:
        r = np.take(r, np.arange(n // 2 + 1), axis=ax)
    return np.stack([r.real, r.imag], axis=-1)


@pytest.mark.parametrize("shape,axis", [((1, 10, 1), 1), ((2, 7, 2), 1), ((3, 5, 4, 2), 2), ((3, 5, 4, 1), 0),
                                        ((1, 1, 2), 1), ((2, 13, 3, 2), -3), ((0, 6, 2), 1)])
@pytest.mark.parametrize("n", [0, 4, 9])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_dft(shape, axis, n, inverse, onesided):
    x = rng.standard_normal(shape).astype(np.float32)
    if inverse and onesided and not n and x.shape[axis % x.ndim] < 2:
        pytest.skip("irfft of one bin has length 0")
    got = run1("dft", [x], [n, axis, inverse, onesided], shapefn="dft")
    want = dft_ref(x, n, axis, inverse, onesided)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_dft_f64_and_errors():
    x = rng.standard_normal((2, 12, 2))
    np.testing.assert_allclose(run1("dft", [x], [0, 1, 0, 0], shapefn="dft"), dft_ref(x, 0, 1, 0, 0), rtol=1e-10, atol=1e-10)
    with pytest.raises(DvmError, match=r"dft: axis -1 is the last dim of \[2,12,2\]"):
        run1("dft", [x], [0, -1, 0, 0], shapefn="dft")
    with pytest.raises(DvmError, match=r"dft: input \[2,12,3\] must be \[..., 1\] \(real\) or \[..., 2\] \(complex\)"):
        run1("dft", [rng.standard_normal((2, 12, 3))], [0, 1, 0, 0], shapefn="dft")


def stft_ref(x, step, window, length, onesided):
    c = to_complex(x.astype(np.float64))
    frames = (x.shape[1] - length) // step + 1
    w = np.ones(length) if window is None else window.astype(np.float64)
    out = []
    for f in range(frames):
        seg = c[:, f * step:f * step + length] * w
        r = np.fft.fft(seg, axis=1)
        if onesided:
            r = r[:, :length // 2 + 1]
        out.append(r)
    r = np.stack(out, axis=1) if out else np.zeros((x.shape[0], 0, length // 2 + 1 if onesided else length))
    return np.stack([r.real, r.imag], axis=-1)


@pytest.mark.parametrize("shape,step,length,win", [((1, 128, 1), 8, 16, False), ((1, 128, 1), 8, 16, True),
                                                   ((2, 37, 2), 5, 7, True), ((3, 10, 1), 1, 10, False),
                                                   ((1, 9, 1), 3, 1, False), ((0, 20, 1), 4, 8, True)])
@pytest.mark.parametrize("onesided", [0, 1])
def test_stft(shape, step, length, win, onesided):
    x = rng.standard_normal(shape).astype(np.float32)
    w = np.hanning(length).astype(np.float32) if win else None
    ins = [x] + ([w] if win else [])
    got = run1("stft", ins, [step, length, onesided], shapefn="stft")
    np.testing.assert_allclose(got, stft_ref(x, step, w, length, onesided), rtol=1e-4, atol=1e-4)


def test_stft_errors():
    x = np.zeros((1, 8, 1), np.float32)
    with pytest.raises(DvmError, match=r"stft: window \[5\] does not have frame_length 4"):
        run1("stft", [x, np.ones(5, np.float32)], [2, 4, 1], shapefn="stft")
    with pytest.raises(DvmError, match=r"stft: frame_length 9 does not fit signal \[1,8,1\]"):
        run1("stft", [x], [2, 9, 1], shapefn="stft")
