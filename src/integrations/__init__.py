"""Adapters for agent frameworks, over the client: `engram.integrations.langchain` (the extra
`engram[langchain]`). Importing `engram` or `engram.client` never needs a framework."""
