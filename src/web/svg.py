"""A small server-side SVG writer: line charts, bar charts, stacked bars, a Beta density.

Pure functions from numbers to SVG text; every label passes through `esc`. No
JavaScript, no fonts to fetch: the pages work offline.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from src.web.escape import esc

W, H = 600, 220
PAD_L, PAD_R, PAD_T, PAD_B = 52, 12, 24, 40
LEGEND_ROW = 14
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
#: One colour per source tag on every page (issue 26: the two charts of /thoughts once gave
#: the same source opposite colours because each coloured by its own sort order).
SOURCE_COLORS: Mapping[str, str] = {
    "external_user": "#1f77b4", "internal_self": "#ff7f0e", "internal_dmn": "#2ca02c",
    "internal_gut": "#d62728", "internal_consolidation": "#9467bd", "internal_scheduled": "#8c564b",
    "internal_system2": "#e377c2", "?": "#7f7f7f",
}
_OTHER_COLORS = ("#17becf", "#bcbd22", "#393b79", "#ad494a", "#637939", "#7b4173")
NO_DATA = "no data yet"


def source_color(tag: str) -> str:
    """The colour of a source tag: fixed for the known tags, stable (by hash) for others."""
    known = SOURCE_COLORS.get(tag)
    if known is not None:
        return known
    return _OTHER_COLORS[int(hashlib.sha256(tag.encode()).hexdigest(), 16) % len(_OTHER_COLORS)]


def _colors(names: Sequence[str], colors: Mapping[str, str] | None) -> list[str]:
    return [(colors or {}).get(n) or PALETTE[k % len(PALETTE)] for k, n in enumerate(names)]


def _legend_rows(legend: Sequence[str]) -> list[list[tuple[str, float]]]:
    """The legend's entries laid out in rows that fit the width: (name, x) per entry."""
    rows: list[list[tuple[str, float]]] = [[]]
    x = float(PAD_L)
    for name in legend:
        width = 14 + 7 * len(name) + 12
        if rows[-1] and x + width > W - PAD_R:
            rows.append([])
            x = float(PAD_L)
        rows[-1].append((name, x))
        x += width
    return rows if rows[0] else []


def _frame(title: str, body: list[str], legend: Sequence[str] = (), colors: Sequence[str] = ()) -> str:
    rows = _legend_rows(legend)
    height = H + LEGEND_ROW * max(len(rows) - 1, 0)     # extra legend rows grow the picture downwards
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" '
             f'viewBox="0 0 {W} {height}" role="img" aria-label="{esc(title)}">',
             f'<rect width="{W}" height="{height}" fill="#fff" stroke="#ccc"/>',
             f'<text x="{PAD_L}" y="16" font-size="13" font-family="sans-serif">{esc(title)}</text>']
    parts += body
    colours = list(colors) or [PALETTE[i % len(PALETTE)] for i in range(len(legend))]
    i = 0
    for r, row in enumerate(rows):      # below the x labels, so long titles never collide
        y = H - 14 + r * LEGEND_ROW
        for name, x in row:
            parts.append(f'<rect x="{x:.0f}" y="{y}" width="10" height="10" fill="{colours[i]}"/>'
                         f'<text x="{x + 14:.0f}" y="{y + 9}" font-size="11" font-family="sans-serif">'
                         f'{esc(name)}</text>')
            i += 1
    parts.append("</svg>")
    return "".join(parts)


def no_data(title: str, why: str = NO_DATA) -> str:
    """An empty plot that says why it is empty (a blank frame reads as a broken page)."""
    return _frame(title, [f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" font-size="12" '
                          f'font-family="sans-serif" fill="#888">{esc(why)}</text>'])


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
    """At most ~8 labels under the axis; one at the right edge ends there instead of being cut off."""
    step = max(1, math.ceil(len(labels) / 8))
    return [f'<text x="{x:.1f}" y="{H - PAD_B + 14}" text-anchor="{"end" if x > W - PAD_R - 20 else "middle"}" '
            f'font-size="10" font-family="sans-serif">{esc(lab)}</text>'
            for k, (lab, x) in enumerate(zip(labels, positions, strict=True)) if k % step == 0]


def _lines(series: Mapping[str, Sequence[float | None]], xs: Sequence[float], lo: float, hi: float,
           colors: Sequence[str], breaks: frozenset[int] = frozenset()) -> list[str]:
    """Polylines and dots; a None value, or an index in `breaks` (a new session), starts a new line."""
    body: list[str] = []
    for color, points in zip(colors, series.values(), strict=True):
        runs: list[list[tuple[float, float]]] = [[]]
        for i, v in enumerate(points):
            if v is None or (i in breaks and runs[-1]):
                runs.append([])
            if v is not None:
                runs[-1].append((xs[i], _sy(v, lo, hi)))
        for run in runs:
            if len(run) > 1:
                path = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
                body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
            body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>' for x, y in run]
    return body


def line_chart(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float | None]],
               *, y_min: float | None = None, y_max: float | None = None,
               colors: Mapping[str, str] | None = None, empty: str = NO_DATA) -> str:
    """One line per series over shared x labels; None leaves a gap; `empty` says why there is none."""
    values = [v for s in series.values() for v in s if v is not None]
    if not labels or not values:
        return no_data(title, empty)
    lo = min(values) if y_min is None else y_min
    hi = max(values) if y_max is None else y_max
    hi = hi if hi > lo else lo + 1.0
    n = max(len(labels) - 1, 1)
    xs = [_sx(i, n) for i in range(len(labels))]
    colours = _colors(list(series), colors)
    body = _axes(lo, hi) + _lines(series, xs, lo, hi, colours) + _x_labels(labels, xs)
    return _frame(title, body, list(series) if len(series) > 1 or colors else (), colours)


def _time_label(t: datetime, span_s: float) -> str:
    """A tick's text: the clock within a day, the date too beyond it (times are UTC)."""
    t = t.astimezone(UTC)
    if span_s < 600:
        return t.strftime("%H:%M:%S")
    return t.strftime("%H:%M") if span_s < 86_400 else t.strftime("%m-%d %H:%M")


def time_chart(title: str, times: Sequence[datetime], series: Mapping[str, Sequence[float | None]],
               *, boundaries: Sequence[datetime] = (), y_min: float | None = None, y_max: float | None = None,
               colors: Mapping[str, str] | None = None, empty: str = NO_DATA) -> str:
    """Lines over a time axis (UTC): x is when, not a counter that restarts each session.

    `boundaries` are session starts: each is drawn as a dashed line marked "restart" (at its
    foot, clear of the title), and no line joins a point before it to one after it. Series
    given `colors` (sources) always show their legend, so a colour is named even when alone.
    """
    values = [v for s in series.values() for v in s if v is not None]
    if not times or not values:
        return no_data(title, empty)
    lo = min(values) if y_min is None else y_min
    hi = max(values) if y_max is None else y_max
    hi = hi if hi > lo else lo + 1.0
    t0, t1 = min(times), max(times)
    span = (t1 - t0).total_seconds()

    def x_of(t: datetime) -> float:
        return _sx((t - t0).total_seconds(), span) if span > 0 else (PAD_L + W - PAD_R) / 2
    xs = [x_of(t) for t in times]
    inside = sorted(b for b in boundaries if t0 < b <= t1)
    breaks = frozenset(i for i in range(1, len(times)) if any(times[i - 1] < b <= times[i] for b in inside))
    body = _axes(lo, hi)
    for b in inside:
        bx = x_of(b)
        body.append(f'<line x1="{bx:.1f}" y1="{PAD_T}" x2="{bx:.1f}" y2="{H - PAD_B}" stroke="#999" '
                    f'stroke-dasharray="3 3"/><text x="{bx + 3:.1f}" y="{H - PAD_B - 3}" font-size="9" '
                    'font-family="sans-serif" fill="#777">restart</text>')
    colours = _colors(list(series), colors)
    body += _lines(series, xs, lo, hi, colours, breaks)
    ticks = [t0 + (t1 - t0) * (k / 4) for k in range(5)] if span > 0 else [t0]
    labels = [_time_label(t, span) + (" UTC" if k == 0 else "") for k, t in enumerate(ticks)]
    body += _x_labels(labels, [x_of(t) for t in ticks])
    return _frame(title, body, list(series) if len(series) > 1 or colors else (), colours)


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], *, empty: str = NO_DATA) -> str:
    """Vertical bars (a histogram when the labels are bins)."""
    return stacked_bars(title, labels, {"": values}, empty=empty)


def stacked_bars(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]],
                 *, colors: Mapping[str, str] | None = None, empty: str = NO_DATA) -> str:
    """Bars per label, one coloured segment per series; all zero is no data (`empty` says why)."""
    if not labels or not series:
        return no_data(title, empty)
    totals = [sum(s[i] for s in series.values()) for i in range(len(labels))]
    if max(totals) <= 0:
        return no_data(title, empty)
    hi = max(totals)
    slot = min((W - PAD_L - PAD_R) / len(labels), 60.0)
    colours = _colors(list(series), colors)
    body = _axes(0.0, hi)
    centers = []
    for i in range(len(labels)):
        x = PAD_L + i * slot + slot * 0.1
        centers.append(x + slot * 0.4)
        base = 0.0
        for color, s in zip(colours, series.values(), strict=True):
            v = s[i]
            if v <= 0:
                continue
            y0, y1 = _sy(base, 0.0, hi), _sy(base + v, 0.0, hi)
            body.append(f'<rect x="{x:.1f}" y="{y1:.1f}" width="{slot * 0.8:.1f}" height="{y0 - y1:.1f}" '
                        f'fill="{color}"><title>{esc(labels[i])}: {esc(_num(v))}</title></rect>')
            base += v
    body += _x_labels(labels, centers)
    names = [n for n in series if n]
    shown = names if len(names) > 1 or (names and (len(series) > 1 or colors)) else []
    return _frame(title, body, shown, [colours[list(series).index(n)] for n in shown])


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
