"""Small inline SVG line charts: no plotting dependency, and every label escaped here, once."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

WIDTH, HEIGHT = 760, 260
MARGIN = dict(left=70, right=20, top=44, bottom=40)


@dataclass
class Line:
    xs: Sequence[float]
    ys: Sequence[float]
    color: str
    label: str
    dash: str = ""


@dataclass
class Band:
    xs: Sequence[float]
    lower: Sequence[float]
    upper: Sequence[float]
    color: str
    label: str


@dataclass
class Point:
    x: float
    y: float
    color: str
    title: str  # shown on hover
    radius: float = 4.0


@dataclass
class Chart:
    title: str
    x_label: str
    y_label: str
    lines: list[Line] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    vlines: list[tuple[float, str, str]] = field(default_factory=list)  # x, label, color
    hlines: list[tuple[float, str, str]] = field(default_factory=list)  # y, label, color
    y_floor: float | None = None  # e.g. 0 for counts: padding never goes below it

    def render(self) -> str:
        xs = (
            [x for line in self.lines for x in line.xs]
            + [x for b in self.bands for x in b.xs]
            + [p.x for p in self.points]
        )
        xs += [v[0] for v in self.vlines]
        ys = [y for line in self.lines for y in line.ys] + [y for b in self.bands for y in (*b.lower, *b.upper)]
        ys += [p.y for p in self.points] + [h[0] for h in self.hlines]
        xs, ys = [x for x in xs if math.isfinite(x)], [y for y in ys if math.isfinite(y)]
        if not xs or not ys:
            return f'<p class="empty">{escape(self.title)}: no data</p>'
        x0, x1 = min(xs), max(xs)
        y0, y1 = min(ys), max(ys)
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        pad = (y1 - y0) * 0.08 or abs(y0) * 0.01 or 1.0
        y0, y1 = y0 - pad, y1 + pad
        if self.y_floor is not None:
            y0 = max(y0, self.y_floor)
        integer_x = all(float(x).is_integer() for x in xs)
        left, top = MARGIN["left"], MARGIN["top"]
        inner_w, inner_h = WIDTH - left - MARGIN["right"], HEIGHT - top - MARGIN["bottom"]

        def px(x: float) -> float:
            return left + (x - x0) / (x1 - x0) * inner_w

        def py(y: float) -> float:
            return top + (1 - (y - y0) / (y1 - y0)) * inner_h

        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" class="chart" role="img">',
            f"<title>{escape(self.title)}</title>",
            f'<text x="{left}" y="18" class="chart-title">{escape(self.title)}</text>',
            f'<rect x="{left}" y="{top}" width="{inner_w}" height="{inner_h}" fill="none" stroke="#ccc"/>',
        ]
        for value in nice_ticks(y0, y1):
            parts.append(
                f'<text x="{left - 6}" y="{py(value) + 4:.1f}" text-anchor="end" class="tick">'
                f"{tick_label(value)}</text>"
            )
        for value in nice_ticks(x0, x1, whole=integer_x):
            parts.append(
                f'<text x="{px(value):.1f}" y="{top + inner_h + 16}" text-anchor="middle" class="tick">'
                f"{tick_label(value)}</text>"
            )
        parts.append(
            f'<text x="{left + inner_w / 2}" y="{HEIGHT - 6}" text-anchor="middle" class="axis">'
            f"{escape(self.x_label)}</text>"
        )
        parts.append(
            f'<text x="14" y="{top + inner_h / 2}" transform="rotate(-90 14 {top + inner_h / 2})" '
            f'text-anchor="middle" class="axis">{escape(self.y_label)}</text>'
        )
        for band in self.bands:
            upper = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(band.xs, band.upper))
            lower = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in reversed(list(zip(band.xs, band.lower))))
            parts.append(
                f'<polygon points="{upper} {lower}" fill="{band.color}" fill-opacity="0.25" stroke="none">'
                f"<title>{escape(band.label)}</title></polygon>"
            )
        for y, label, color in self.hlines:
            parts.append(
                f'<line x1="{left}" x2="{left + inner_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="{color}" '
                f'stroke-dasharray="4 3"><title>{escape(label)}</title></line>'
            )
        for x, label, color in self.vlines:
            parts.append(
                f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{top}" y2="{top + inner_h}" stroke="{color}" '
                f'stroke-width="2"><title>{escape(label)}</title></line>'
            )
        for line in self.lines:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(line.xs, line.ys) if math.isfinite(y))
            dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{line.color}" stroke-width="1.5"{dash}>'
                f"<title>{escape(line.label)}</title></polyline>"
            )
        for point in self.points:
            parts.append(
                f'<circle cx="{px(point.x):.1f}" cy="{py(point.y):.1f}" r="{point.radius}" fill="{point.color}">'
                f"<title>{escape(point.title)}</title></circle>"
            )
        legend = [*((line.label, line.color) for line in self.lines), *((b.label, b.color) for b in self.bands)]
        for i, (label, color) in enumerate(legend[:4]):
            x = left + i * 170
            parts.append(
                f'<rect x="{x}" y="{top - 16}" width="10" height="10" fill="{color}"/>'
                f'<text x="{x + 14}" y="{top - 7}" class="legend">{escape(label[:26])}</text>'
            )
        parts.append("</svg>")
        return "".join(parts)


def tick_label(value: float) -> str:
    """A tick's text, short enough for the axis margin: 88.5k rather than 8.85e+04."""
    size = abs(value)
    if size >= 1e9:
        return f"{value / 1e9:.4g}G"
    if size >= 1e6:
        return f"{value / 1e6:.4g}M"
    if size >= 1e4:
        return f"{value / 1e3:.4g}k"
    return f"{value:.4g}"


def nice_ticks(low: float, high: float, count: int = 5, whole: bool = False) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) inside [low, high], at most ``count`` and
    as many as fit; whole numbers only when ``whole``. An axis ending at 120 is not labelled 130.6."""
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return [low]
    exponent = math.floor(math.log10(span / max(count - 1, 1)))
    steps = [m * 10.0**e for e in (exponent - 1, exponent, exponent + 1) for m in (1, 2, 5)]
    for step in steps:
        if whole and step < 1:
            continue
        first = math.ceil(low / step - 1e-9)
        ticks = [round(k * step, 10) for k in range(first, math.floor(high / step + 1e-9) + 1)]
        if len(ticks) <= count:
            return ticks
    return [low, high]
