"""What the API says: its request bodies (requests), its answers (responses) and their examples.

A leaf beside the domain: the service returns these answers, the API validates requests and writes
answers with them, and the Python client reads answers with them, so one shape is declared once.
It imports pydantic and the domain's value checks, nothing else of ours.
"""
