"""Small vectorised numeric helpers (numpy only): normal cdf/ppf, ramps, smooth noise."""

from __future__ import annotations

import math

import numpy as np

_SQRT2 = math.sqrt(2.0)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised error function (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7)."""
    x = np.asarray(x, dtype=np.float64)
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def norm_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal cumulative distribution function."""
    return 0.5 * (1.0 + erf(np.asarray(x, dtype=np.float64) / _SQRT2))


def norm_ppf(p: np.ndarray | float) -> np.ndarray:
    """Standard normal quantile function (Acklam's rational approximation, ~1e-9 relative)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-300, 1 - 1e-16)
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    lo, hi = 0.02425, 1 - 0.02425
    out = np.empty_like(p)
    m = p < lo
    if m.any():
        q = np.sqrt(-2 * np.log(p[m]))
        out[m] = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    m = p > hi
    if m.any():
        q = np.sqrt(-2 * np.log1p(-p[m]))
        out[m] = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    m = (p >= lo) & (p <= hi)
    if m.any():
        q = p[m] - 0.5
        r = q * q
        out[m] = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    return out


def smoothstep(u: np.ndarray) -> np.ndarray:
    """0 below 0, 1 above 1, a smooth S in between."""
    u = np.clip(u, 0.0, 1.0)
    return u * u * (3.0 - 2.0 * u)


def ramp(n: int, start: float, width: float, shape: str = "smooth") -> np.ndarray:
    """0 before index ``start``, rising to 1 over ``width`` indices ('smooth', 'linear', 'convex', 'fast')."""
    u = (np.arange(n, dtype=np.float64) - start) / max(width, 1.0)
    u = np.clip(u, 0.0, 1.0)
    if shape == "linear":
        return u
    if shape == "convex":  # slow start, accelerating (a spiral, a runaway)
        return u * u
    if shape == "fast":  # most of the change early (a break)
        return 1.0 - (1.0 - u) ** 3
    return smoothstep(u)


def after(n: int, start: float) -> np.ndarray:
    """Steps elapsed since index ``start`` (0 before it)."""
    return np.maximum(np.arange(n, dtype=np.float64) - start, 0.0)


def smooth_noise(rng: np.random.Generator, n: int, corr: float) -> np.ndarray:
    """Zero-mean, unit-sd noise correlated over about ``corr`` indices (Gaussian filter via FFT)."""
    corr = max(float(corr), 0.5)
    pad = int(min(4 * corr, 4 * n)) + 8
    m = n + 2 * pad
    white = rng.standard_normal(m)
    freqs = np.fft.rfftfreq(m)
    kernel = np.exp(-0.5 * (2 * np.pi * freqs * corr) ** 2)
    out = np.fft.irfft(np.fft.rfft(white) * kernel, m)[pad : pad + n]
    sd = out.std()
    return out / sd if sd > 0 else out


def lognoise(rng: np.random.Generator, n: int | tuple[int, ...], sigma: float) -> np.ndarray:
    """Multiplicative noise with median 1: exp(N(0, sigma))."""
    return np.exp(rng.normal(0.0, max(sigma, 0.0), n))


def loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    """One draw, uniform in log space between lo and hi."""
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)) with p clipped away from 0 and 1."""
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + np.exp(-x))


def beta_moment(mean: np.ndarray, conc: np.ndarray, k: int) -> np.ndarray:
    """E[p^k] for p ~ Beta(mean * conc, (1 - mean) * conc), elementwise."""
    a = mean * conc
    out = np.ones_like(a)
    for j in range(k):
        out *= (a + j) / (conc + j)
    return out
