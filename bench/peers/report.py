"""The side-by-side table of ``make bench-peers`` (plain Python, no Django).

Each system is one dict shaped like ``eval_locomo``'s report and the mem0 runner's JSON:
``{"system", "ingest_turns_per_s", "latency_ms": {"p50", "p95"}, "recall": {category:
{"1": r, "5": r, "10": r}}, "count": {category: n}}``, optionally ``"steal"`` (a label) and
``"error"`` (why it has no figures).
"""

from __future__ import annotations

from typing import Any

CATEGORY_ORDER = ("multi-hop", "temporal", "open-domain", "single-hop")


def _number(value: Any, width: int, digits: int) -> str:
    if value is None:
        return "-".rjust(width)
    return f"{float(value):{width}.{digits}f}"


def summary_table(systems: list[dict[str, Any]], ks: tuple[int, ...] = (1, 5, 10)) -> list[str]:
    """One row per system: ingest turns/s, query p50/p95 ms, overall R@k, CPU steal."""
    name_width = max([len("system"), *(len(s["system"]) for s in systems)])
    header = (f"{'system':<{name_width}}  {'ingest turns/s':>14}  {'p50 ms':>7}  {'p95 ms':>7}"
              + "".join(f"  {f'R@{k}':>6}" for k in ks) + "  steal")
    lines = [header, "-" * len(header)]
    for s in systems:
        if s.get("error"):
            lines.append(f"{s['system']:<{name_width}}  failed: {s['error']}")
            continue
        lat = s.get("latency_ms") or {}
        overall = (s.get("recall") or {}).get("overall", {})
        lines.append(
            f"{s['system']:<{name_width}}  {_number(s.get('ingest_turns_per_s'), 14, 1)}"
            f"  {_number(lat.get('p50'), 7, 1)}  {_number(lat.get('p95'), 7, 1)}"
            + "".join(f"  {_number(overall.get(str(k)), 6, 3)}" for k in ks)
            + f"  {s.get('steal', '')}".rstrip()
        )
    return lines


def category_table(systems: list[dict[str, Any]], k: int = 10) -> list[str]:
    """R@k per question category (rows) for each system (columns), with the question count."""
    ok = [s for s in systems if not s.get("error")]
    widths = [max(len(s["system"]), 6) for s in ok]
    header = f"{f'R@{k} by category':<16}  {'n':>4}" + "".join(
        f"  {s['system']:>{w}}" for s, w in zip(ok, widths, strict=True))
    lines = [header, "-" * len(header)]
    categories = [c for c in (*CATEGORY_ORDER, "overall")
                  if any(c in (s.get("recall") or {}) for s in ok)]
    for cat in categories:
        counts = [(s.get("count") or {}).get(cat) for s in ok]
        n = next((c for c in counts if c is not None), None)
        row = f"{cat:<16}  {n if n is not None else '-':>4}"
        for s, w in zip(ok, widths, strict=True):
            row += f"  {_number((s.get('recall') or {}).get(cat, {}).get(str(k)), w, 3)}"
        lines.append(row)
    return lines
