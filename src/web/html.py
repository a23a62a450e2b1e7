"""HTML building blocks of the web view: the page frame, tables, sections.

Every value goes through `esc`; only the SVG produced by src/web/svg.py (which
escapes its own labels) and the markup built here are inserted raw.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from src.web.escape import esc

NAV = (("/", "Overview"), ("/memories", "Memories"), ("/thoughts", "Thoughts"), ("/gates", "Gates"),
       ("/consolidation", "Consolidation"), ("/gut", "Gut"), ("/chat", "Chat"))

CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#243b53;color:#fff;padding:8px 16px}
header a{color:#fff;margin-right:14px;text-decoration:none}header a.on{text-decoration:underline}
main{padding:8px 16px}h1{font-size:20px}h2{font-size:16px;margin-top:22px}
table{border-collapse:collapse;font-size:12px;background:#fff;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#eef2f6}td.n{text-align:right;font-variant-numeric:tabular-nums}td.d{white-space:nowrap}
.ctl{background:#fde2e2;color:#a00;font-family:monospace}.muted{color:#777}
.plots{display:flex;flex-wrap:wrap;gap:10px}.kv td:first-child{font-weight:600}
figure{margin:0;width:600px}figcaption{font-size:12px;color:#555;padding:2px 2px 6px}
td.t{min-width:14em;max-width:60em;overflow-wrap:anywhere}table.results td.t{min-width:28em}td.why{font-size:11px;color:#555;background:#fcfcfc}
table.sub{margin:0;font-size:11px}table.sub td{border-color:#eee;padding:1px 4px}
pre{white-space:pre-wrap;background:#fff;border:1px solid #ddd;padding:6px;max-width:1000px}
form{margin:6px 0}input,select{font-size:13px}.pager a{margin-right:14px}
.talk{display:flex;flex-direction:column-reverse;overflow-y:auto;max-height:calc(100vh - 230px);max-width:980px}
ol.chat{list-style:none;padding:0 8px 0 0;margin:6px 0}
ol.chat li{margin:8px 0;padding:6px 10px;border:1px solid #ddd;border-radius:6px;background:#fff}
ol.chat li.you{margin-right:12%;background:#eef2f6}ol.chat li.mind{margin-left:12%}
ol.chat li.wait{border-style:dashed}.who{font-size:12px;color:#555;margin-bottom:3px}
.said{white-space:pre-wrap;overflow-wrap:anywhere}.err{color:#a00;font-weight:600}
form.chat{display:flex;gap:8px;max-width:960px}form.chat input[name=text]{flex:1;padding:6px;font-size:14px}
form.chat button{font-size:14px;padding:6px 14px}
"""
#: Columns of free text: given room to wrap by words instead of being squeezed to one word a line.
TEXT_COLUMNS = frozenset({"content", "output", "attention_focus", "reason", "content_preview", "text",
                          "context", "error", "decision"})


@dataclass
class Page:
    """One page: its title, the data (the ?format=json answer) and how to build the HTML body.

    `body` is called in a worker thread: building tables and plots is CPU work that must
    not hold up the cognitive loop.
    """

    title: str
    data: dict[str, Any]
    body: Callable[[], list[str]] = lambda: []
    status: int = 200
    # seconds after which the browser loads the page again (the chat page while a reply is
    # on its way: the view runs no script, so a <meta> refresh is how the reply appears)
    refresh_s: int | None = None
    # the line under every page: what the page does to the mind (the chat page writes)
    note: str = "Read-only view."


def layout(page: Page, path: str) -> str:
    """The whole HTML document: navigation, title, body, a link to the JSON."""
    nav = "".join(f'<a href="{esc(href)}"{" class=on" if href == path else ""}>{esc(name)}</a>'
                  for href, name in NAV)
    json_href = path + ("&" if "?" in path else "?") + "format=json"
    refresh = f'<meta http-equiv="refresh" content="{page.refresh_s:d}">' if page.refresh_s else ""
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>{esc(page.title)} · MoltBot</title>{refresh}<style>{CSS}</style></head><body>"
            f"<header><strong>MoltBot</strong> · {nav}</header><main><h1>{esc(page.title)}</h1>"
            + "".join(page.body())
            + f'<p class=muted>{esc(page.note)} <a href="{esc(json_href)}">This page as JSON</a>.</p>'
            "</main></body></html>")


def fmt(value: Any) -> str:
    """A value as the tables show it."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Decimal):
        return f"{value:.4f}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


Cell = Callable[[Mapping[str, Any]], str]


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str | tuple[str, Cell]],
          empty: str = "none yet") -> str:
    """A table of `rows`; a column is a key, or (header, function returning escaped HTML)."""
    if not rows:
        return f"<p class=muted>{esc(empty)}</p>"
    heads = [c if isinstance(c, str) else c[0] for c in columns]
    out = ["<table><tr>", *(f"<th>{esc(h)}</th>" for h in heads), "</tr>"]
    for row in rows:
        out.append("<tr>")
        for c in columns:
            if isinstance(c, str):
                v = row.get(c)
                cls = (" class=n" if isinstance(v, int | float | Decimal) and not isinstance(v, bool) else
                       " class=d" if isinstance(v, datetime) else " class=t" if c in TEXT_COLUMNS else "")
                out.append(f"<td{cls}>{esc(fmt(v))}</td>")
            else:
                out.append(f"<td>{c[1](row)}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def kv(pairs: Sequence[tuple[str, Any]]) -> str:
    return "<table class=kv>" + "".join(f"<tr><td>{esc(k)}</td><td>{esc(fmt(v))}</td></tr>"
                                        for k, v in pairs) + "</table>"


def section(title: str, *parts: str) -> str:
    return f"<h2>{esc(title)}</h2>" + "".join(parts)


def plots(*figures: str) -> str:
    """Figures side by side, wrapping to the next line when the window is narrow."""
    return "<div class=plots>" + "".join(figures) + "</div>"


def figure(svg: str, caption: str) -> str:
    """A plot with its unit and a one-line explanation under it (`caption` is plain text)."""
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def data_html(value: Any) -> str:
    """A JSON value as the guardian reads it: objects as key/value tables, lists of objects as
    tables, memory ids as links; never raw JSON."""
    if isinstance(value, Mapping):
        if not value:
            return ""
        return "<table class=sub>" + "".join(
            f"<tr><td>{esc(k)}</td><td>{_field_html(str(k), v)}</td></tr>" for k, v in value.items()) + "</table>"
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, Mapping) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            return ("<table class=sub><tr>" + "".join(f"<th>{esc(k)}</th>" for k in keys) + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{_field_html(k, v.get(k))}</td>" for k in keys) + "</tr>"
                              for v in value) + "</table>")
        return ", ".join(data_html(v) for v in value)
    return esc(fmt(value))


def inline(value: Any) -> str:
    """A small object on one line ("decayed 0, demoted 0"; "narrative: reflex mode"); bigger
    values as `data_html` tables. Empty values are left out."""
    if isinstance(value, Mapping):
        shown = {k: v for k, v in value.items() if v not in (None, "", {}, [])}
        if all(not isinstance(v, Mapping | list | tuple) for v in shown.values()):
            return ", ".join(f"{esc(k)}{':' if isinstance(v, str) else ''} {esc(fmt(v))}" for k, v in shown.items())
    return data_html(value)


#: Keys whose values are memory ids (readiness events, DMN items): shown as links.
MEMORY_ID_KEYS = frozenset({"memory_id", "memory_ids", "recalled", "source_ids", "insight_id"})


def _field_html(key: str, value: Any) -> str:
    if key in MEMORY_ID_KEYS or key.endswith("_memory_id"):
        ids = value if isinstance(value, list) else [value]
        if all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return ", ".join(memory_link(i) for i in ids)
    return data_html(value)


def memory_link(memory_id: Any) -> str:
    if memory_id is None:
        return ""
    return f'<a href="/memories/{quote(str(memory_id))}">#{esc(memory_id)}</a>'


def jsonable(value: Any) -> Any:
    """json.dumps default: datetimes as ISO 8601, decimals as floats."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, set | tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
