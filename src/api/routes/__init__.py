"""The API's routes, one router per resource, in the order /openapi.json lists them."""

from fastapi import APIRouter

from . import bot_keys, candidates, forgets, governance, health, insights, memories, operations, recall, receipts

ROUTERS: tuple[APIRouter, ...] = (
    health.router, memories.router, forgets.router, candidates.router, insights.router, recall.router, receipts.router,
    operations.router, governance.router, bot_keys.router,
)
