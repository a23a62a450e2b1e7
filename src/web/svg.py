"""A small server-side SVG writer: line charts, bar charts, stacked bars, a Beta density.

Pure functions from numbers to SVG text; every label passes through `esc`. No
JavaScript, no fonts to fetch: the pages work offline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from src.web.escape import esc

W, H = 600, 220
PAD_L, PAD_R, PAD_T, PAD_B = 52, 12, 24, 40
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _frame(title: str, body: list[str], legend: Sequence[str] = ()) -> str:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'viewBox="0 0 {W} {H}" role="img" aria-label="{esc(title)}">',
             f'<rect width="{W}" height="{H}" fill="#fff" stroke="#ccc"/>',
             f'<text x="{PAD_L}" y="16" font-size="13" font-family="sans-serif">{esc(title)}</text>']
    parts += body
    x = float(PAD_L)
    for i, name in enumerate(legend):     # below the x labels, so long titles never collide
        parts.append(f'<rect x="{x:.0f}" y="{H - 14}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                     f'<text x="{x + 14:.0f}" y="{H - 5}" font-size="11" font-family="sans-serif">{esc(name)}</text>')
        x += 14 + 7 * len(name) + 12
    parts.append("</svg>")
    return "".join(parts)


def _empty(title: str) -> str:
    return _frame(title, [f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" font-size="12" '
                          'font-family="sans-serif" fill="#888">no data yet</text>'])


def _axes(y_min: float, y_max: float) -> list[str]:
    if y_max <= y_min:
        y_max = y_min + 1.0
    out = [f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" stroke="#333"/>',
           f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" stroke="#333"/>']
    for frac in (0.0, 0.5, 1.0):
        y = H - PAD_B - frac * (H - PAD_T - PAD_B)
        value = y_min + frac * (y_max - y_min)
        out.append(f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10" '
                   f'font-family="sans-serif">{esc(_num(value))}</text>')
    return out


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


def _sx(i: float, n: float) -> float:
    return PAD_L + (i / max(n, 1e-12)) * (W - PAD_L - PAD_R)


def _sy(v: float, lo: float, hi: float) -> float:
    span = hi - lo if hi > lo else 1.0
    return H - PAD_B - ((v - lo) / span) * (H - PAD_T - PAD_B)


def _x_labels(labels: Sequence[str], positions: Sequence[float]) -> list[str]:
    step = max(1, math.ceil(len(labels) / 8))
    return [f'<text x="{x:.1f}" y="{H - PAD_B + 14}" text-anchor="middle" font-size="10" '
            f'font-family="sans-serif">{esc(lab)}</text>'
            for k, (lab, x) in enumerate(zip(labels, positions, strict=True)) if k % step == 0]


def line_chart(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float | None]],
               *, y_min: float | None = None, y_max: float | None = None) -> str:
    """One line per series over shared x labels; None leaves a gap."""
    values = [v for s in series.values() for v in s if v is not None]
    if not labels or not values:
        return _empty(title)
    lo = min(values) if y_min is None else y_min
    hi = max(values) if y_max is None else y_max
    hi = hi if hi > lo else lo + 1.0
    n = max(len(labels) - 1, 1)
    body = _axes(lo, hi)
    for k, (_, points) in enumerate(series.items()):
        color = PALETTE[k % len(PALETTE)]
        coords = [(_sx(i, n), _sy(v, lo, hi)) for i, v in enumerate(points) if v is not None]
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>' for x, y in coords]
    body += _x_labels(labels, [_sx(i, n) for i in range(len(labels))])
    return _frame(title, body, list(series) if len(series) > 1 else ())


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float]) -> str:
    """Vertical bars (a histogram when the labels are bins)."""
    return stacked_bars(title, labels, {"": values})


def stacked_bars(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]]) -> str:
    """Bars per label, one coloured segment per series."""
    if not labels or not series:
        return _empty(title)
    totals = [sum(s[i] for s in series.values()) for i in range(len(labels))]
    hi = max(totals) or 1.0
    slot = min((W - PAD_L - PAD_R) / len(labels), 60.0)
    body = _axes(0.0, hi)
    centers = []
    for i in range(len(labels)):
        x = PAD_L + i * slot + slot * 0.1
        centers.append(x + slot * 0.4)
        base = 0.0
        for k, s in enumerate(series.values()):
            v = s[i]
            if v <= 0:
                continue
            y0, y1 = _sy(base, 0.0, hi), _sy(base + v, 0.0, hi)
            body.append(f'<rect x="{x:.1f}" y="{y1:.1f}" width="{slot * 0.8:.1f}" height="{y0 - y1:.1f}" '
                        f'fill="{PALETTE[k % len(PALETTE)]}"><title>{esc(labels[i])}: {esc(_num(v))}'
                        '</title></rect>')
            base += v
    body += _x_labels(labels, centers)
    names = [n for n in series if n]
    return _frame(title, body, names if len(names) > 1 or (names and len(series) > 1) else ())


def beta_pdf(x: float, alpha: float, beta: float) -> float:
    """Density of Beta(alpha, beta) at x in (0, 1)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0
    log_b = math.lgamma(alpha) + math.lgamma(beta) - math.lgamma(alpha + beta)
    return math.exp((alpha - 1) * math.log(x) + (beta - 1) * math.log1p(-x) - log_b)


def beta_interval(alpha: float, beta: float, mass: float = 0.9, steps: int = 2000) -> tuple[float, float]:
    """Equal-tailed credible interval of Beta(alpha, beta), by integrating the density on a grid."""
    xs = [(i + 0.5) / steps for i in range(steps)]
    dens = [beta_pdf(x, alpha, beta) for x in xs]
    total = sum(dens)
    tail = (1.0 - mass) / 2.0
    lo = hi = None
    acc = 0.0
    for x, d in zip(xs, dens, strict=True):
        acc += d / total
        if lo is None and acc >= tail:
            lo = x
        if hi is None and acc >= 1.0 - tail:
            hi = x
            break
    return (lo if lo is not None else 0.0, hi if hi is not None else 1.0)


def beta_density(alpha: float, beta: float, *, mass: float = 0.9, steps: int = 200) -> str:
    """The density curve of a memory's weight, its center and a shaded credible interval."""
    center = alpha / (alpha + beta)
    lo, hi = beta_interval(alpha, beta, mass)
    xs = [(i + 0.5) / steps for i in range(steps)]
    ys = [beta_pdf(x, alpha, beta) for x in xs]
    top = max(ys) * 1.05 or 1.0
    title = (f"Beta({_num(alpha)}, {_num(beta)}): center {center:.3f}, "
             f"{mass:.0%} interval [{lo:.3f}, {hi:.3f}]")
    body = _axes(0.0, top)
    band = [(x, y) for x, y in zip(xs, ys, strict=True) if lo <= x <= hi]
    if band:
        pts = [(_sx(band[0][0], 1), _sy(0, 0, top))] + [(_sx(x, 1), _sy(y, 0, top)) for x, y in band] \
            + [(_sx(band[-1][0], 1), _sy(0, 0, top))]
        body.append('<polygon fill="#1f77b4" fill-opacity="0.2" points="'
                    + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
    curve = " ".join(f"{_sx(x, 1):.1f},{_sy(y, 0, top):.1f}" for x, y in zip(xs, ys, strict=True))
    body.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{curve}"/>')
    cx = _sx(center, 1)
    body.append(f'<line x1="{cx:.1f}" y1="{PAD_T}" x2="{cx:.1f}" y2="{H - PAD_B}" stroke="#d62728" '
                'stroke-dasharray="4 3"/>')
    ticks = [f"{t / 10:.1f}" for t in range(11)]
    body += _x_labels(ticks, [_sx(t / 10, 1) for t in range(11)])
    return _frame(title, body)
