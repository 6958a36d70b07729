"""Export renderings for people: the JSON document as readable Markdown."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else ("" if value is None else str(value))


def to_markdown(data: dict[str, Any]) -> str:
    lines = [f"# Memories of {data['person']} ({data['company']})", "", f"Exported {_fmt(data['exported_at'])}.", ""]
    for m in data["memories"]:
        answer = m.get("answer") or {}
        title = answer.get("text") or m["text"] or "(forgotten)"  # what recall answers now, not a future revision
        lines += [f"## {title}", ""]
        lines.append(f"- id: `{m['id']}`, revision {m['revision']}, {m['status']}, {m['visibility']}")
        lines.append(f"- valid from {_fmt(m['valid_from']) or 'unknown'} to {_fmt(m['valid_to']) or 'open'}")
        for ev in m.get("evidence") or []:
            src = ev.get("source") or {}
            lines.append(f"- evidence: \"{ev.get('quote')}\" ({src.get('kind')} {src.get('id')}, "
                         f"message {src.get('message_id')}, {_fmt(ev.get('occurred_at'))})")
        lines += ["", "History:", ""]
        for h in m.get("history") or []:
            text = f": {h['text']}" if h.get("text") else ""
            lines.append(f"1. {_fmt(h['at'])} {h['type']} by {h['actor']} (revision {h['revision']}){text}")
        lines.append("")
    insights = data.get("insights") or []
    if insights:
        lines += ["# Insights", ""]
    for i in insights:
        lines += [f"## {i['text'] or '(its evidence was forgotten)'}", ""]
        reason = f" ({i['reason']})" if i.get("reason") else ""
        lines.append(f"- id: `{i['id']}`, {i['status']}{reason}, proposed by {i['proposer']} at {_fmt(i['proposed_at'])}")
        lines.append("- rests on: " + ", ".join(f"`{m}`" for m in i["evidence_memory_ids"]))
        for ev in i.get("evidence") or []:
            lines.append(f"- evidence: \"{ev.get('quote')}\" (memory `{ev.get('memory_id')}`)")
        lines.append("")
    return "\n".join(lines)
