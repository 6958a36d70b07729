"""The Python client of the Engram API: `from engram.client import Client, AsyncClient, EngramError`.

    with Client("http://127.0.0.1:8080", token) as engram:
        engram.remember(text="I prefer short bullet points", source={"kind": "chat", "id": "c-1", "message_id": "m-1"})
        for item in engram.recall(query="report format").items:
            print(item.text, item.evidence[0].quote)

Methods take the request body's fields as keyword arguments and return the server's own response
models (`engram.contract.responses`); a problem response raises `EngramError`. Importing it needs httpx and
pydantic only, none of the server's modules.
"""

from .clients import DEFAULT_TIMEOUT, AsyncClient, Client
from .errors import EngramError
from .retry import RetryPolicy

__all__ = ["DEFAULT_TIMEOUT", "AsyncClient", "Client", "EngramError", "RetryPolicy"]
