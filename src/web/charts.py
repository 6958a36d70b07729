"""Small charts drawn on the server as SVG: no script, no other host, readable without colour.

Each chart has a title and a description for screen readers, and every bar its own `<title>` with
the figures; the page shows the same figures in a table beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Bar:
    label: str  # under the bar (e.g. "11-29")
    value: int
    note: str  # the bar's tooltip and accessible name


WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 560, 180, 56, 28, 12


def _nice_ceiling(value: int) -> int:
    """The axis top: 1, 2 or 5 times a power of ten, at least `value` (and at least 1)."""
    top = 1
    while True:
        for multiple in (1, 2, 5):
            if top * multiple >= value:
                return top * multiple
        top *= 10


def bar_chart(title: str, description: str, bars: Sequence[Bar], limit: int | None = None) -> str:
    """An SVG bar chart. `limit`, when given, is drawn as a dashed line when it is near enough the bars
    to matter (at most twice the largest); a far-off limit would flatten them (the table has it)."""
    highest = max([b.value for b in bars] + [1])
    shown_limit = limit if limit and limit <= 2 * highest else None
    top = _nice_ceiling(max(highest, shown_limit or 0))
    plot_w, plot_h = WIDTH - PAD_LEFT - 8, HEIGHT - PAD_TOP - PAD_BOTTOM
    step = plot_w / max(len(bars), 1)

    def y(v: int) -> float:
        return PAD_TOP + plot_h - plot_h * v / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-labelledby="chart-title chart-desc" class="chart">',
             f'<title id="chart-title">{escape(title)}</title><desc id="chart-desc">{escape(description)}</desc>',
             f'<line x1="{PAD_LEFT}" y1="{y(0):.1f}" x2="{WIDTH - 8}" y2="{y(0):.1f}" class="axis"/>',
             f'<text x="{PAD_LEFT - 6}" y="{y(top) + 4:.1f}" text-anchor="end" class="tick">{top:,}</text>',
             f'<text x="{PAD_LEFT - 6}" y="{y(0) + 4:.1f}" text-anchor="end" class="tick">0</text>']
    for i, bar in enumerate(bars):
        x = PAD_LEFT + i * step + step * 0.15
        height = y(0) - y(bar.value)
        parts.append(f'<rect x="{x:.1f}" y="{y(bar.value):.1f}" width="{step * 0.7:.1f}" height="{height:.1f}" '
                     f'class="bar"><title>{escape(bar.note)}</title></rect>')
        parts.append(f'<text x="{x + step * 0.35:.1f}" y="{HEIGHT - 10}" text-anchor="middle" class="tick">'
                     f'{escape(bar.label)}</text>')
    if shown_limit:
        parts.append(f'<line x1="{PAD_LEFT}" y1="{y(shown_limit):.1f}" x2="{WIDTH - 8}" y2="{y(shown_limit):.1f}" '
                     f'class="limit"/>')
        parts.append(f'<text x="{WIDTH - 10}" y="{y(shown_limit) - 4:.1f}" text-anchor="end" class="tick">'
                     f'daily limit {shown_limit:,}</text>')
    parts.append("</svg>")
    return "".join(parts)
