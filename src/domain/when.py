"""The days a question names, resolved against the time it is asked, in English and in Chinese.

"on 9 December 2025", "December 9", "2025年12月9日", "12月9号", "2025-12-09"; "yesterday", "前天",
"two weeks ago", "三天前", "last Tuesday", "this Wednesday", "上周二", "这周三". A day without a year is
the latest such day not after the asking day. Pure: recall uses the days as a ranking signal.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime, time, timedelta

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


# -- what a statement says about the days ahead: the end of a plan ------------------------------------

_PAST_TENSE = re.compile(r"\b(?:was|were|did|had|went|came|got|ago|last|yesterday)\b|昨天|前天|上周|上个|去年|了$")
_RECURRING = re.compile(r"\b(?:every|each|weekly|monthly|usually|always|normally)\b|每|例会|平时|一般|通常|总是")
_EN_NEXT_WEEKDAY = re.compile(r"\b(next|this|on|coming)?\s*(?<!every )(?<!each )"
                              r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?!s)\b")
_EN_AHEAD = re.compile(r"\bin (\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few) "
                       r"(day|week|month)s?\b")
_EN_NEXT_PERIOD = re.compile(r"\b(next|this|coming) (week|weekend|month)\b|\b(tomorrow|the day after tomorrow)\b")
_EN_DATE_AHEAD = re.compile(r"\bthe (\d{1,2})(?:st|nd|rd|th)\b(?! of)"
                            r"|\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]{3,9})\b(?:,?\s*(\d{4}))?"
                            r"|\b((?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]{0,6})\.?\s+(\d{1,2})"
                            r"(?:st|nd|rd|th)?\b(?:,?\s*(\d{4}))?")
_ZH_WEEKDAY_AHEAD = re.compile(r"(?<!每)(下下|下|这|本)?\s*个?\s*(?:周|星期|礼拜)([一二三四五六日天])")
_ZH_NEXT_PERIOD = re.compile(r"(大后天|后天|明天|明早|明晚|明年|下下周|下周|下个?星期|下个?礼拜|下个月|月底|周末)"
                             r"(?![一二三四五六日天\d])")
_ZH_DATE_AHEAD = re.compile(r"(?:(\d{4}|明)\s*年\s*)?(?:(\d{1,2}|下个?)\s*月\s*)?(\d{1,2}|底)\s*[日号]?"
                            r"(?<=[日号底])")
_ZH_AHEAD = re.compile(r"(\d+|[一两二三四五六七八九十])\s*个?\s*(天|周|星期|礼拜|月)(?:之|以)?后")


def _next_date(today: date, month: int, day: int, year: int | None) -> date | None:
    """The named day, on or after `today` (a day without a year: this year's, else next year's)."""
    try:
        found = date(year or today.year, month, day)
        if year is None and found < today:
            found = date(today.year + 1, month, day)
    except ValueError:
        return None
    return found if found >= today else None


def _next_day_of_month(today: date, day: int) -> date | None:
    """"the 19th", 8号: this month's, on or after today, else next month's."""
    found = _next_date(today, today.month, day, None) if day >= today.day else None
    after = _month_after(today, 1)
    return found or _next_date(after, after.month, day, None)


def _month_after(today: date, months: int) -> date:
    month = today.year * 12 + today.month - 1 + months
    return date(month // 12, month % 12 + 1, 1)


def plan_end(text: str, today: date) -> date | None:
    """The first day after everything a plan names ahead of `today` ("next Thursday": after the later of
    the two Thursdays it may mean; "on the 19th", 下个月8号, "in two weeks", 下周, "this weekend"), or
    None when it names no day ahead, or speaks in the past. A plan is true until that day; what it says
    after is no longer a plan."""
    t = unicodedata.normalize("NFKC", text).casefold()
    if _PAST_TENSE.search(t) or _RECURRING.search(t):
        return None  # a past one, or one that comes again
    try:
        return _plan_end(t, today)
    except (OverflowError, ValueError):
        return None


def _plan_end(t: str, today: date) -> date | None:
    ahead: list[date] = []
    monday = today - timedelta(days=today.weekday())
    for which, name in _EN_NEXT_WEEKDAY.findall(t):
        if which not in ("next", "this", "coming"):
            continue  # "the weekly meeting is on Friday": a day of every week as likely as this one
        day = monday + timedelta(days=_WEEKDAYS.index(name))
        if day < today:
            day += timedelta(days=7)
        ahead.append(day + timedelta(days=7) if which == "next" else day)  # "next": the later reading
    for count, unit in _EN_AHEAD.findall(t):
        ahead.append(today + timedelta(days=_count(count) * _EN_UNIT[unit]))
    for which, unit, soon in _EN_NEXT_PERIOD.findall(t):
        if soon:
            ahead.append(today + timedelta(days=1 if soon == "tomorrow" else 2))
        elif unit in ("week", "weekend"):  # to its Sunday
            ahead.append(monday + timedelta(days=13 if which == "next" else 6))
        else:
            ahead.append(_month_after(today, 2 if which == "next" else 1) - timedelta(days=1))
    for bare, d1, m1, y1, m2, d2, y2 in _EN_DATE_AHEAD.findall(t):
        if bare:
            found = _next_day_of_month(today, int(bare))
        else:
            month, number, year = (m1, d1, y1) if d1 else (m2, d2, y2)
            found = _next_date(today, _MONTHS[month], int(number), int(year) if year else None) \
                if month in _MONTHS else None
        if found:
            ahead.append(found)
    for which, name in _ZH_WEEKDAY_AHEAD.findall(t):
        if not which:
            continue  # 周会在周五: every week's as likely as this one's
        weeks = {"下下": 2, "下": 1}.get(which, 0)
        day = monday + timedelta(days=7 * weeks + _ZH_WEEKDAY[name])
        if day >= today:
            ahead.append(day)
    for word in _ZH_NEXT_PERIOD.findall(t):
        ahead.append({"明天": today + timedelta(days=1), "明早": today + timedelta(days=1),
                      "明晚": today + timedelta(days=1), "后天": today + timedelta(days=2),
                      "大后天": today + timedelta(days=3), "下下周": monday + timedelta(days=20),
                      "月底": _month_after(today, 1) - timedelta(days=1), "周末": monday + timedelta(days=6),
                      "明年": date(today.year + 1, 12, 31),
                      "下个月": _month_after(today, 2) - timedelta(days=1)}.get(word, monday + timedelta(days=13)))
    for year, month, day in _ZH_DATE_AHEAD.findall(t):
        y = today.year + 1 if year == "明" else int(year) if year else None
        m = _month_after(today, 1).month if month.startswith("下") else int(month) if month else None
        if day == "底":
            if m is None:
                continue  # 月底 alone: above
            first = _month_after(date(y or today.year, m, 1), 1)
            found = _next_date(today, m, (first - timedelta(days=1)).day, y)
        elif m is not None:
            if month.startswith("下") and y is None and m < today.month:
                y = today.year + 1
            found = _next_date(today, m, int(day), y)
        else:
            found = _next_day_of_month(today, int(day))
        if found:
            ahead.append(found)
    for count, unit in _ZH_AHEAD.findall(t):
        ahead.append(today + timedelta(days=_count(count) * _ZH_UNIT[unit]))
    ahead = [d for d in ahead if d >= today]
    return max(ahead) + timedelta(days=1) if ahead else None


def valid_time(text: str, said_at: datetime | None) -> tuple[datetime | None, datetime | None]:
    """(valid_from, valid_to) of a statement, resolved against when it was said, where that is certain:
    a plan is true from when it was said until after the last day it names ("next Thursday we have the
    offsite": until the Friday after the later Thursday it may mean); a change said in the past is true
    from the day it names ("I moved to Lisbon last month": the first of last month). Otherwise, or when
    the time it was said is unknown, (None, None): the time stays uncertain."""
    if said_at is None:
        return None, None
    today = said_at.date()  # the day where the person was (the message's own offset)
    end = plan_end(text, today)
    if end is not None:
        return said_at, datetime.combine(end, time(), said_at.tzinfo)
    t = unicodedata.normalize("NFKC", text).casefold()
    start = change_day(t, today) if _PAST_TENSE.search(t) else None
    return (datetime.combine(start, time(), said_at.tzinfo), None) if start is not None else (None, None)
