"""Export renderings for people: the JSON document as readable Markdown."""

from __future__ import annotations

from typing import Any

from engram.contract.responses import ExportOut


def _fmt(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else ("" if value is None else str(value))


def to_markdown(data: ExportOut) -> str:
    lines = [f"# Memories of {data.person} ({data.company})", "", f"Exported {_fmt(data.exported_at)}.", ""]
    for m in data.memories:
        # what recall answers now, not a future revision
        title = (m.answer.text if m.answer is not None else None) or m.text or "(forgotten)"
        lines += [f"## {title}", ""]
        lines.append(f"- id: `{m.id}`, revision {m.revision}, {m.status}, {m.visibility}")
        lines.append(f"- valid from {_fmt(m.valid_from) or 'unknown'} to {_fmt(m.valid_to) or 'open'}")
        for ev in m.evidence:
            src = ev.source
            lines.append(f"- evidence: \"{ev.quote}\" ({src.kind} {src.id}, "
                         f"message {src.message_id}, {_fmt(ev.occurred_at)})")
        lines += ["", "History:", ""]
        for h in m.history:
            text = f": {h.text}" if h.text else ""
            lines.append(f"1. {_fmt(h.at)} {h.type} by {h.actor} (revision {h.revision}){text}")
        lines.append("")
    if data.insights:
        lines += ["# Insights", ""]
    for i in data.insights:
        lines += [f"## {i.text or '(its evidence was forgotten)'}", ""]
        reason = f" ({i.reason})" if i.reason else ""
        lines.append(f"- id: `{i.id}`, {i.status}{reason}, proposed by {i.proposer} at {_fmt(i.proposed_at)}")
        lines.append("- rests on: " + ", ".join(f"`{m}`" for m in i.evidence_memory_ids))
        for ev in i.evidence:
            lines.append(f"- evidence: \"{ev.quote}\" (memory `{ev.memory_id}`)")
        lines.append("")
    return "\n".join(lines)
