"""The configured insight proposers beyond the local one: Hindsight's observations when Hindsight
is configured, the model when one is (ADR 0022)."""

from __future__ import annotations

from typing import Protocol

from engram.domain.clock import Clock

from .budget import BudgetLedger, DailyBudgetSettings, daily_limits
from .chat_model import ChatModel
from .hindsight import HindsightClient
from .insight_hindsight import HindsightObservationProposer
from .insight_model import ModelInsightProposer


class ProposerSettings(DailyBudgetSettings, Protocol):
    @property
    def hindsight_url(self) -> str | None: ...
    @property
    def llm_base_url(self) -> str | None: ...
    @property
    def llm_model(self) -> str: ...
    @property
    def llm_api_key(self) -> str | None: ...
    @property
    def max_text_bytes(self) -> int: ...


def insight_proposers(settings: ProposerSettings, *, budget: BudgetLedger, clock: Clock,
                      hindsight_client: HindsightClient | None = None,
                      ) -> list[HindsightObservationProposer | ModelInsightProposer]:
    """`hindsight_client` must be given (signing with Engram's key) when Hindsight is configured."""
    proposers: list[HindsightObservationProposer | ModelInsightProposer] = []
    if settings.hindsight_url:
        if hindsight_client is None:
            raise ValueError("Hindsight is configured: its insight proposer needs the signing client")
        proposers.append(HindsightObservationProposer(hindsight_client, max_text_bytes=settings.max_text_bytes))
    if settings.llm_base_url:
        chat = ChatModel(settings.llm_base_url, settings.llm_model, settings.llm_api_key, max_output_tokens=1024)
        proposers.append(ModelInsightProposer(chat, budget, daily_limits(settings), clock,
                                              max_text_bytes=settings.max_text_bytes))
    return proposers
