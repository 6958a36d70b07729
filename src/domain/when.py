"""The days a question names, resolved against the time it is asked, in English and in Chinese.

"on 9 December 2025", "December 9", "2025年12月9日", "12月9号", "2025-12-09"; "yesterday", "前天",
"two weeks ago", "三天前", "last Tuesday", "this Wednesday", "上周二", "这周三". A day without a year is
the latest such day not after the asking day. Pure: recall uses the days as a ranking signal.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, timedelta

_MONTHS = {m: i + 1 for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july",
                                           "august", "september", "october", "november", "december"))}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "couple of": 2, "few": 3,
           "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_UNIT = {"day": 1, "week": 7, "month": 30, "year": 365}
_ZH_UNIT = {"天": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30, "年": 365}

_DAY_MONTH = re.compile(r"\b(\d{1,2})(?!\d)(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]{3,9})\.?(?:,?\s*(\d{4}))?")
_MONTH_DAY = re.compile(r"\b([a-z]{3,9})\.?\s+(\d{1,2})(?!\d)(?:st|nd|rd|th)?(?:,?\s*(\d{4}))?")
_ZH_DATE = re.compile(r"(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_EN_AGO = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)\s+"
                     r"(day|week|month|year)s?\s+ago\b")
_ZH_AGO = re.compile(r"(\d+|[一两二三四五六七八九十])\s*个?\s*(天|周|星期|礼拜|月|年)(?:之|以)?前")
_EN_WEEKDAY = re.compile(r"\b(last|this|on)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b")
_ZH_WEEKDAY_RE = re.compile(r"(上上|上|这|本)\s*个?\s*(?:周|星期|礼拜)([一二三四五六日天])")


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNTS[word]


def _back(today: date, days: int) -> date | None:
    """`days` before `today`, or None past the calendar's start (a question may say "99999 years ago")."""
    try:
        return today - timedelta(days=days)
    except (OverflowError, ValueError):
        return None


def _absolute(text: str, today: date) -> list[date]:
    named: list[tuple[int | None, int, int]] = []
    for day, month, year in _DAY_MONTH.findall(text):
        if month in _MONTHS:
            named.append((int(year) if year else None, _MONTHS[month], int(day)))
    for month, day, year in _MONTH_DAY.findall(text):
        if month in _MONTHS:
            named.append((int(year) if year else None, _MONTHS[month], int(day)))
    for year, month, day in _ZH_DATE.findall(text):
        named.append((int(year) if year else None, int(month), int(day)))
    for year, month, day in _ISO.findall(text):
        named.append((int(year), int(month), int(day)))
    days = []
    for year, month, day in named:
        try:
            found = date(today.year if year is None else year, month, day)
            if year is None and found > today:
                found = date(today.year - 1, month, day)
        except ValueError:
            continue
        days.append(found)
    return days


def _relative(text: str, today: date) -> list[date | None]:
    days: list[date | None] = []
    if re.search(r"\bday before yesterday\b|前天", text):
        days.append(_back(today, 2))
    elif re.search(r"\byesterday\b|昨天|昨晚", text):
        days.append(_back(today, 1))
    if re.search(r"\btoday\b|\btonight\b|今天|今晚", text):
        days.append(today)
    for count, unit in _EN_AGO.findall(text):
        days.append(_back(today, _count(count) * _EN_UNIT[unit]))
    for count, unit in _ZH_AGO.findall(text):
        days.append(_back(today, _count(count) * _ZH_UNIT[unit]))
    monday = today.toordinal() - today.weekday()
    for which, name in _EN_WEEKDAY.findall(text):
        day = monday + _WEEKDAYS.index(name)
        if which != "this" and day >= today.toordinal():  # "last Tuesday", "on Tuesday": the latest before today
            day -= 7
        days.append(_back(today, today.toordinal() - day))
    for which, name in _ZH_WEEKDAY_RE.findall(text):
        weeks = {"上上": -2, "上": -1, "这": 0, "本": 0}[which]
        days.append(_back(today, today.toordinal() - (monday + 7 * weeks + _ZH_WEEKDAY[name])))
    return days


def days_named(text: str, today: date) -> list[date]:
    """The days the text names, earliest mention first, each once; nothing far outside the calendar."""
    text = unicodedata.normalize("NFKC", text).casefold()
    found = [d for d in [*_absolute(text, today), *_relative(text, today)] if d is not None]
    return list(dict.fromkeys(found))


_EN_PERIOD = re.compile(r"\b(last|this) (week|month|year)\b|\b(?:since|from) (monday|tuesday|wednesday|thursday|"
                        r"friday|saturday|sunday)\b|\bin (january|february|march|april|may|june|july|august|"
                        r"september|october|november|december)\b")
_ZH_PERIOD = re.compile(r"(上上|上|这|本)\s*(?:个)?\s*(周|星期|礼拜|月)|(去年|今年|前年)|"
                        r"(\d{1,2}|[一二三四五六七八九十]{1,2})\s*月(?:份)?(?!\s*\d)")
_ZH_MONTH = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "十一": 11,
             "十二": 12}


def _month_start(today: date, back: int) -> date:
    month = today.year * 12 + today.month - 1 - back
    return date(month // 12, month % 12 + 1, 1)


def _period_start(text: str, today: date) -> list[date]:
    """The first day of a named past period: "last month" (its first day), "this week" (its Monday),
    "in March" (the latest March begun by today), 上个月, 去年, 三月."""
    found: list[date] = []
    monday = today - timedelta(days=today.weekday())
    for which, unit, since_day, month in _EN_PERIOD.findall(text):
        if since_day:
            day = monday + timedelta(days=_WEEKDAYS.index(since_day))
            found.append(day if day <= today else day - timedelta(days=7))
        elif month:
            number = _MONTHS[month]
            found.append(date(today.year if number <= today.month else today.year - 1, number, 1))
        elif unit == "week":
            found.append(monday - timedelta(days=7 if which == "last" else 0))
        elif unit == "month":
            found.append(_month_start(today, 1 if which == "last" else 0))
        else:
            found.append(date(today.year - (1 if which == "last" else 0), 1, 1))
    for which, unit, year, month in _ZH_PERIOD.findall(text):
        back = {"上上": 2, "上": 1, "这": 0, "本": 0}.get(which, 0)
        if year:
            found.append(date(today.year - {"去年": 1, "今年": 0, "前年": 2}[year], 1, 1))
        elif month:
            number = int(month) if month.isdigit() else _ZH_MONTH.get(month, 0)
            if 1 <= number <= 12:
                found.append(date(today.year if number <= today.month else today.year - 1, number, 1))
        elif unit == "月":
            found.append(_month_start(today, back))
        else:
            found.append(monday - timedelta(days=7 * back))
    return found


def change_day(text: str, today: date) -> date | None:
    """The day a statement says its change happened ("I moved to Lisbon last month": the first of last
    month; "two weeks ago"; 上个月; "on 3 March"), when it names one not after `today`; else None."""
    text = unicodedata.normalize("NFKC", text).casefold()
    try:
        days = [*_absolute(text, today), *[d for d in _relative(text, today) if d is not None],
                *_period_start(text, today)]
    except (OverflowError, ValueError):
        return None
    past = [d for d in days if d <= today]
    return min(past) if past else None
