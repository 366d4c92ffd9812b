"""The overview's chart, drawn on the server as SVG: one stacked bar per day, a colour per
series, a legend with each series' total. No library, no script: the page works offline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memkeeper.ui.html import Html, h

COLOURS = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f3b73",
)

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 900, 240, 44, 22, 8


def stacked_bars(
    days: Sequence[str], series: Mapping[str, Mapping[str, int]], *, title: str
) -> Html:
    """An SVG of ``series`` (name → day → count) over ``days``, oldest left.

    Each bar's title (a tooltip) lists its day's counts; the legend gives each series'
    total over the whole span, so the figures can be read without hovering.
    """
    names = list(series)
    totals = [sum(series[name].get(day, 0) for name in names) for day in days]
    top = max([1, *totals])
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    step = plot_w / max(1, len(days))
    bar = max(1.0, step * 0.8)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="100%" role="img" aria-label="{h(title)}" class="chart">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" '
        'stroke="#dde2ea"/>',
    ]
    for fraction in (0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#eef1f6"/>'
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#5a6475">{round(top * fraction)}</text>'
        )
    for index, day in enumerate(days):
        x = LEFT + index * step + (step - bar) / 2
        y = TOP + plot_h
        tip = [day] + [f"{name} {series[name][day]}" for name in names if series[name].get(day)]
        parts.append(f"<g><title>{h(', '.join(tip))}</title>")
        for number, name in enumerate(names):
            count = series[name].get(day, 0)
            if not count:
                continue
            tall = plot_h * count / top
            y -= tall
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{tall:.1f}" '
                f'fill="{COLOURS[number % len(COLOURS)]}"/>'
            )
        parts.append("</g>")
        if index % 15 == 0 or index == len(days) - 1:
            last = index == len(days) - 1
            anchor = ' text-anchor="end"' if last else ""
            parts.append(
                f'<text x="{x + bar if last else x:.1f}" y="{HEIGHT - 6}" font-size="11" '
                f'fill="#5a6475"{anchor}>{h(day[5:])}</text>'
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="legend" data-series="{h(name)}">'
        f'<svg width="10" height="10"><rect width="10" height="10" '
        f'fill="{COLOURS[number % len(COLOURS)]}"/></svg> {h(name)} '
        f"<b>{sum(series[name].values())}</b></span> "
        for number, name in enumerate(names)
    )
    return Html("".join(parts) + f'<p class="note">{legend}</p>')
