"""The language of the person's pages: English (en, the templates' own words) or 简体中文 (zh).

The person's choice (the `engram_lang` cookie, set by `POST /language`) wins; without one, the
browser's `Accept-Language` decides, by its q-values (zh, zh-CN, zh-Hans, zh-TW, ... are zh); English
otherwise. The words come from gettext catalogues (`locale/<language>/LC_MESSAGES/messages.po`), read
with Babel when first needed, so no compiled file has to be built or installed.
"""

from __future__ import annotations

import functools
import gettext
from datetime import datetime
from importlib import resources
from io import BytesIO
from typing import Any

from babel.core import negotiate_locale
from babel.dates import format_date, format_skeleton, get_datetime_format
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations
from fastapi import Request

ENGLISH = "en"
LANGUAGES = (ENGLISH, "zh")  # the first is the default and the templates' own words
LANGUAGE_COOKIE = "engram_lang"
COOKIE_LIFETIME = 365 * 24 * 3600  # a choice, not a session: kept a year


def N_(message: str) -> str:
    """Marks a message for the catalogues; it is translated where it is shown (gettext's usual name)."""
    return message


def from_header(header: str | None) -> str:
    """The best of our languages for an `Accept-Language` header (RFC 9110: q-values, q=0 refuses)."""
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate((header or "").split(",")[:32]):
        tag, *parameters = (part.strip() for part in item.split(";"))
        weight = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if tag and 0 < weight <= 1:
            ranked.append((-weight, position, tag.replace("_", "-")))
    found = negotiate_locale([tag for *_, tag in sorted(ranked)], LANGUAGES, sep="-")
    return found.lower() if found else ENGLISH


def of(request: Request) -> str:
    """The page's language: the person's choice, else the browser's."""
    chosen = request.cookies.get(LANGUAGE_COOKIE)
    return chosen if chosen in LANGUAGES else from_header(request.headers.get("accept-language"))


@functools.cache
def catalogue(language: str) -> gettext.NullTranslations:
    """The language's words; English is the templates' own."""
    if language == ENGLISH:
        return gettext.NullTranslations()
    source = resources.files("engram.web") / "locale" / language / "LC_MESSAGES" / "messages.po"
    with source.open("rb") as po:
        messages = read_po(po, locale=language)
    compiled = BytesIO()
    write_mo(compiled, messages)  # fuzzy entries are left out: English until someone checks them
    compiled.seek(0)
    return Translations(compiled)


def translated(language: str, message: str) -> str | None:
    """The message in the language, or None where its catalogue has no words for it."""
    words = catalogue(language).gettext(message)
    return words if language == ENGLISH or words != message else None


def when(value: Any, language: str) -> str:
    """A time as people read it, with its offset (the page never guesses the reader's time zone): English
    keeps the year-month-day order of ISO 8601, other languages the date and clock of their CLDR data."""
    if value is None or value == "":
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if language == ENGLISH:
        text = moment.strftime("%Y-%m-%d %H:%M")
    else:
        clock, day = format_skeleton("Hm", moment, locale=language), format_date(moment, "long", locale=language)
        text = str(get_datetime_format("medium", locale=language)).format(clock, day)
    offset = moment.strftime("%z")
    return f"{text} UTC" if offset in ("", "+0000") else f"{text} UTC{offset[:3]}:{offset[3:]}"
