"""Engram: a self-hosted, event-sourced memory service for bots.

One installed package: `engram.domain`, `engram.service`, `engram.projections`, `engram.adapters`,
`engram.api` (and `engram.hindsight_guard`, which Hindsight also loads on its own).
"""
