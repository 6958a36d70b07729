"""The bearer token check: a verified token is remembered, but every use checks its times again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.api.identity import InvalidToken, TokenExpired, TokenTooLong, caller_from_token, issue_token

SECRET = "a-test-secret-" + "x" * 32
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_a_token_verified_once_still_expires() -> None:
    token = issue_token(SECRET, company="acme", user="ann", ttl=timedelta(hours=1), now=NOW)
    for _ in range(2):  # the second check is answered from what the first verified
        assert caller_from_token(SECRET, token, now=NOW).person == "ann"
    with pytest.raises(TokenExpired):
        caller_from_token(SECRET, token, now=NOW + timedelta(hours=1))
    assert caller_from_token(SECRET, token, now=NOW + timedelta(minutes=59)).company == "acme"


def test_a_verified_token_is_not_accepted_under_another_secret() -> None:
    token = issue_token(SECRET, company="acme", user="ann", now=NOW)
    assert caller_from_token(SECRET, token, now=NOW).person == "ann"
    with pytest.raises(InvalidToken):
        caller_from_token("another-secret-" + "y" * 32, token, now=NOW)


def test_a_forged_token_fails_every_time() -> None:
    good = issue_token(SECRET, company="acme", user="ann", now=NOW)
    header, payload, signature = good.split(".")
    forged = f"{header}.{payload}.{signature[:-4]}AAAA"
    for _ in range(2):
        with pytest.raises(InvalidToken):
            caller_from_token(SECRET, forged, now=NOW)


def test_the_lifetime_limit_holds_for_a_remembered_token() -> None:
    token = issue_token(SECRET, company="acme", user="ann", ttl=timedelta(days=40), now=NOW)
    for _ in range(2):
        with pytest.raises(TokenTooLong):
            caller_from_token(SECRET, token, now=NOW, max_lifetime=timedelta(days=30))
    assert caller_from_token(SECRET, token, now=NOW, max_lifetime=timedelta(days=60)).person == "ann"
