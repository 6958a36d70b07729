"""Insights: derived judgments the person confirms or rejects; recall returns the confirmed ones."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from engram.contract.responses import InsightList, InsightOut

from ..dependencies import Insights, Reviewer, Who
from ..middleware import JsonRoute
from ..paths import PathId
from ..reference import STORED_NOT_VISIBLE, answers

router = APIRouter(route_class=JsonRoute, tags=["insights"])


@router.get("/v1/insights", summary="List the person's insights", response_model=InsightList, responses=answers(None, 400))
def list_insights(
    who: Who, insights: Insights,
    status: Annotated[Literal["proposed", "confirmed", "invalidated"] | None, Query()] = None,
) -> Any:
    """Judgments proposed from several confirmed memories (a repeated preference, an observation),
    each with the memories it rests on and their evidence. `status` filters: proposed, confirmed or
    invalidated.
    """
    return insights.list_insights(who, status=status)


@router.post("/v1/insights/{insight_id}/confirm", summary="Confirm an insight", response_model=InsightOut,
             responses=answers({202: (InsightOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def confirm_insight(insight_id: PathId, who: Reviewer, insights: Insights) -> Any:
    """A proposed insight becomes usable: recall returns it with `kind: insight` for as long as every
    memory it rests on stays in use. An insight already invalidated is 409. Only the person reviews: a
    bot token gets 403 `person_only`.
    """
    return insights.confirm(who, insight_id)


@router.post("/v1/insights/{insight_id}/reject", summary="Reject an insight", response_model=InsightOut,
             responses=answers({202: (InsightOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def reject_insight(insight_id: PathId, who: Reviewer, insights: Insights) -> Any:
    """The insight is never proposed again from the same memories, and never used."""
    return insights.reject(who, insight_id)
