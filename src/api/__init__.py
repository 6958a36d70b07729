"""Entry points: the HTTP API, the CLI, and the composition root that wires them."""
