"""`engram`: serve, token, projections."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from datetime import timedelta

from .bootstrap import PROJECTIONS, Engram, token_secret
from .identity import issue_token


def _settings():  # noqa: ANN202
    from service.settings import Settings

    return Settings()


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .http import create_app

    settings = _settings()
    if not settings.token_secret:
        print("ENGRAM_TOKEN_SECRET is not set: using a development secret derived from the data "
              "directory's master key; `engram token` uses the same one.", file=sys.stderr)
    engram = Engram.open(settings)
    mode = "external PostgreSQL" if engram.embedded is None else f"embedded PostgreSQL in {engram.embedded.pgdata}"
    print(f"engram: {mode}; serving on http://{args.host}:{args.port}", file=sys.stderr)
    # uvicorn shuts down gracefully on SIGTERM and then re-raises it; make that re-raise an
    # ordinary exit so the projectors and the embedded PostgreSQL are stopped below.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        uvicorn.run(create_app(engram, token_secret(settings)), host=args.host, port=args.port,
                    log_level="warning", access_log=False)
    finally:
        engram.close()
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    settings = _settings()
    print(issue_token(token_secret(settings), company=args.company, user=args.user, role=args.role,
                      bot=args.bot, entry=args.entry, ttl=timedelta(hours=args.hours)))
    return 0


def cmd_projections(args: argparse.Namespace) -> int:
    engram = Engram.open(_settings(), background=False) if args.action == "status" else None
    if args.action == "status":
        assert engram is not None
        try:
            for row in engram.status():
                print(f"{row['projection']:<10} position {row['position']:>10}  head {row['head']:>10}  lag {row['lag']}")
        finally:
            engram.close()
        return 0
    if args.name not in PROJECTIONS:
        print(f"unknown projection {args.name!r}; known: {', '.join(PROJECTIONS)}", file=sys.stderr)
        return 2
    engram = Engram.open(_settings(), background=False)
    try:
        applied = engram.rebuild(args.name)
        print(f"rebuilt {args.name}: applied {applied} events")
    finally:
        engram.close()
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engram", description="Engram memory service")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="serve the API")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8080)
    s.set_defaults(func=cmd_serve)

    t = sub.add_parser("token", help="print a signed token for local use")
    t.add_argument("--company", required=True)
    t.add_argument("--user", required=True)
    t.add_argument("--role", default="user", choices=["user", "bot", "admin", "operator"])
    t.add_argument("--bot")
    t.add_argument("--entry", default="api", choices=["web", "channel", "scheduled", "api"])
    t.add_argument("--hours", type=float, default=12.0)
    t.set_defaults(func=cmd_token)

    pr = sub.add_parser("projections", help="inspect or rebuild read models")
    prs = pr.add_subparsers(dest="action", required=True)
    prs.add_parser("status")
    rb = prs.add_parser("rebuild")
    rb.add_argument("name")
    pr.set_defaults(func=cmd_projections)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as e:
        print(f"engram: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
