"""Reads over the insight view (and the recall view's memory rows its evidence is checked against): a
person's insights, their evidence's state, the proposers' due work and the invalidations to record."""

from __future__ import annotations

from typing import Any

_MEMORY_STATE = (
    "SELECT m.memory_id, m.company, m.person, m.visibility, m.team, m.sealed_source, m.status, m.revision, "
    "m.sealed_text, m.sealed_evidence, k.wrapped FROM engram_memories m "
    "LEFT JOIN engram_data_keys k ON k.key_id = m.memory_id "
)


# Out of use but not yet recorded for good: no Invalidated event stored yet, or resting on a forgotten
# memory while its own key (its text came from that memory) still exists.
_UNSETTLED = ("((i.status = 'invalidated' AND NOT i.settled) OR "
              "(i.evidence_forgotten AND k.key_id IS NOT NULL))")


class InsightQueries:
    """Reads over the insight view (and the recall view's memory rows its evidence is checked against).
    Rows come back sealed; the service unseals and authorizes each one."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore

    def _all(self, sql: str, params: Any) -> list[dict[str, Any]]:
        with self.datastore.get_connection() as conn:
            return list(conn.execute(sql, params, prepare=True).fetchall())

    def insights(self, *, company: str, person: str, statuses: list[str], limit: int = 500,
                 sharing: list[int] | None = None) -> list[dict[str, Any]]:
        """`sharing`: only the insights holding at least one of these (blinded) terms."""
        return self._all(
            "SELECT i.*, k.wrapped FROM engram_insights i LEFT JOIN engram_data_keys k ON k.key_id = i.insight_id "
            "WHERE i.company = %s AND i.person = %s AND i.status = ANY(%s) "
            "AND (%s::bigint[] IS NULL OR i.terms && %s::bigint[]) ORDER BY i.proposed_at DESC, i.insight_id "
            "LIMIT %s", (company, person, statuses, sharing, sharing, limit))

    def memory_states(self, ids: list[Any]) -> list[dict[str, Any]]:
        """The recall view's rows of these memories (every status), with their wrapped keys."""
        if not ids:
            return []
        return self._all(_MEMORY_STATE + "WHERE m.memory_id = ANY(%s::uuid[])", (list(ids),))

    def answers(self, ids: list[Any]) -> list[dict[str, Any]]:
        """Which revisions of these memories answer for which valid time."""
        if not ids:
            return []
        return self._all("SELECT memory_id, revision, answer_from, answer_to FROM engram_recall_revisions "
                         "WHERE memory_id = ANY(%s::uuid[]) AND is_answer", (list(ids),))

    def confirmed_memories(self, company: str, person: str, limit: int) -> list[dict[str, Any]]:
        """A person's confirmed memories, newest first: what the proposers look at."""
        return self._all(_MEMORY_STATE + "WHERE m.company = %s AND m.person = %s AND m.status = 'confirmed' "
                         "ORDER BY m.updated_at DESC LIMIT %s", (company, person, limit))

    def due_work(self, limit: int) -> list[dict[str, Any]]:
        return self._all("SELECT company, person, changed_at FROM engram_insight_work ORDER BY changed_at LIMIT %s",
                         (limit,))

    def work_done(self, company: str, person: str, changed_at: Any) -> None:
        """Done with this person up to `changed_at`: a later change keeps the row for the next round."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("DELETE FROM engram_insight_work WHERE company = %s AND person = %s AND changed_at <= %s",
                         (company, person, changed_at))

    def insight(self, insight_id: Any) -> list[dict[str, Any]]:
        return self._all(
            "SELECT i.*, k.wrapped FROM engram_insights i LEFT JOIN engram_data_keys k ON k.key_id = i.insight_id "
            "WHERE i.insight_id = %s", (insight_id,))

    def unsettled(self, limit: int) -> list[dict[str, Any]]:
        """Insights this view invalidated whose own Invalidated event is not stored yet, and insights
        resting on a forgotten memory whose key still exists."""
        return self._all(
            "SELECT i.insight_id, i.reason, i.evidence_forgotten FROM engram_insights i "
            "LEFT JOIN engram_data_keys k ON k.key_id = i.insight_id "
            f"WHERE {_UNSETTLED} ORDER BY i.updated_at LIMIT %s", (limit,))

    def backlog(self, company: str | None) -> dict[str, int]:
        """People whose changed memories the proposers have not looked at yet, and invalidations not yet
        recorded for good (a company's, or everyone's): counts only."""
        where, params = ("WHERE company = %s", (company,)) if company else ("", ())
        people = self._all(f"SELECT count(*) AS n FROM engram_insight_work {where}", params)[0]["n"]
        unsettled = self._all(
            "SELECT count(*) AS n FROM engram_insights i LEFT JOIN engram_data_keys k ON k.key_id = i.insight_id "
            f"WHERE {_UNSETTLED}" + (" AND i.company = %s" if company else ""), params)[0]["n"]
        return {"people_to_propose": int(people), "invalidations_to_record": int(unsettled)}

