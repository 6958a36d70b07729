"""Insights: derived judgments the person confirms or rejects; recall returns the confirmed ones."""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from ..dependencies import Insights, Who
from ..middleware import JsonRoute
from ..models import InsightList, InsightOut
from ..reference import STORED_NOT_VISIBLE, answers
from ..schemas import PathId

router = APIRouter(route_class=JsonRoute, tags=["insights"])


@router.get("/v1/insights", response_model=InsightList, responses=answers(None, 400))
def list_insights(
    who: Who, insights: Insights,
    status: Annotated[Literal["proposed", "confirmed", "invalidated"] | None, Query()] = None,
) -> Any:
    return insights.list_insights(who, status=status)


@router.post("/v1/insights/{insight_id}/confirm", response_model=InsightOut,
             responses=answers({202: (InsightOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def confirm(insight_id: PathId, who: Who, insights: Insights) -> Any:
    return insights.confirm(who, insight_id)


@router.post("/v1/insights/{insight_id}/reject", response_model=InsightOut,
             responses=answers({202: (InsightOut, STORED_NOT_VISIBLE)}, 403, 404, 409))
def reject(insight_id: PathId, who: Who, insights: Insights) -> Any:
    return insights.reject(who, insight_id)
