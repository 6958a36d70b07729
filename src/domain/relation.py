"""How a new statement stands to one the person already holds: the same thing said again (`duplicate`),
a change of it (`update`), or neither (None). Pure rules, in English and in Chinese (ADR 0041).

Precision first: a wrong `update` would offer to overwrite a true memory, a wrong `duplicate` would fold
away a new fact. So a pair is related only when the rules are sure:

- `duplicate`: both say the same words once fillers ("as I said", "again", "btw", 我说过) and
  function words are set aside, or both fill one single-valued slot with the same value;
- `update`: both fill one single-valued slot (where the person lives, who their manager is, where they
  work, which team, a named meeting's time, a favourite) with different values.

Everything else is None: two hobbies, a relative's city beside the person's own, a past job beside the
current one, two different meetings.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

DUPLICATE, UPDATE = "duplicate", "update"

# every one has an apostrophe: a text without one skips them all
_CONTRACTIONS = tuple((re.compile(p), r) for p, r in (
    (r"\bi'm\b", "i am"), (r"\bi've\b", "i have"), (r"\bwe're\b", "we are"), (r"\bwe've\b", "we have"),
    (r"n't\b", " not"), (r"\b(standup|meeting|sync|retro|call|class)'s\b", r"\1 is"),
    (r"\b(manager|boss|lead|supervisor)'s\b", r"\1 is")))
_FILLERS_EN = re.compile(
    r"\b(?:as i (?:said|mentioned|told you)(?: before| earlier)?|like i (?:said|mentioned)(?: before)?|"
    r"as i've said|i told you(?: before)?|just so you know|for the record|by the way|btw|fyi|actually|really|"
    r"still|again|now|currently|these days|nowadays|anymore|any more|just|also|oh|yeah|yes|well|ok|okay|so|"
    r"haha|lol|please remember(?: that)?|remember(?: that)?|note that|to be honest|tbh|honestly|"
    r"officially|finally|recently|as usual|same as always|as always|as before|like before|same as before|"
    r"as i (?:said|told you|mentioned) before|like i told you|as i told you|i think i said|in case you forgot|"
    r"always have been|no change|unchanged|these days|lately|generally|usually|normally|typically|mostly|"
    r"i'd say|basically)\b")
_FILLERS_ZH = re.compile(r"(?:我(?:之前|以前|上次|刚才)?(?:说过|讲过|提过|告诉过你)(?:的)?|之前说过|再说一遍|顺便说一下|顺便说|"
                         r"跟(?:之前|以前|原来)一样|和(?:之前|以前|原来)一样|照旧|照常|没变|不变|老样子|还是那样|"
                         r"对了|其实|现在|目前|还是|依然|仍然|已经|终于|最近|记住|记一下|那个|就是|一般|通常|基本|都|"
                         r"啦|了|呢|吧|啊|呀|哦|嘛|哈+)")
_STOP_EN = frozenset(
    "a an the and or but to of in at on for with from by as is am are was were be been being i me my mine we us "
    "our it its this that these those do does did have has had will would shall should can could there here "
    "very much quite".split())
_LIGHT_EN = frozenset(
    "live lives living lived use uses using get gets got go goes going do does doing have having has "
    "called named name one thing kind sort time always every each all".split())
_LIGHT_ZH = frozenset("是的在我们个这那去有用叫还常也就")
_CJK = re.compile(r"[\u3400-\u9fff]")
_PUNCT = re.compile(r"[^\w\s:]+")
_SPACE = re.compile(r"\s")
_SPACE_PUNCT_ZH = re.compile(r"[\s,，。.!！?？、;；:：~～…\"'“”‘’()（）]+")

_TAIL_EN = re.compile(r"\s+(?:last|this|next|since|from|until|in (?:january|february|march|april|may|june|july|"
                      r"august|september|october|november|december|spring|summer|autumn|fall|winter|\d{4})|"
                      r"a (?:few|couple)|(?:a|one|two|three|four|five|six) (?:days?|weeks?|months?|years?) ago|"
                      r"with|because|and|but|for|starting|as of|ago|yesterday|today|on (?:monday|tuesday|wednesday|"
                      r"thursday|friday|saturday|sunday))\b.*$")
_TAIL_ZH = re.compile(r"(?:上个?月|这个?月|下个?月|上周|这周|下周|去年|今年|明年|昨天|今天|从.*|开始.*|以后.*|之后.*)$")
_NEGATED = re.compile(r"\b(?:not|no longer|never|used to|lived|worked|formerly|before that)\b|不再|不在|不住|以前|曾经")

_PLACE = r"(?P<v>[\w\s'.-]{2,60}?)"
_SLOTS_EN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("team", re.compile(r"\b(?:i|we) (?:am |are |have )?(?:on|in|joined|moved to|switched to|transferred to) "
                        r"(?:the )?(?P<v>[\w\s'-]{2,40}?) (?:team|squad|department|group)\b")),
    ("residence", re.compile(r"\b(?:i|we) (?:am |are |have |had )?(?:live|living|moved|relocated|settled|based)"
                             r" (?:in|to|into|over to|down to|up to|out to) " + _PLACE + r"$")),
    ("residence", re.compile(r"\bmy (?:home|flat|apartment|house) is (?:in )?" + _PLACE + r"$")),
    ("employer", re.compile(r"\bi (?:am )?(?:work|working|employed) (?:at|for|by) " + _PLACE + r"$")),
    ("employer", re.compile(r"\bi (?:have )?(?:joined|started (?:a new job |working )?at|got a (?:new )?job at|"
                            r"have a (?:new )?job at|took a job at) " + _PLACE + r"$")),
    ("manager", re.compile(r"\bmy (?:new )?(?:manager|boss|line manager|team lead|supervisor|lead) is "
                           r"(?P<v>[\w\s'.-]{2,40}?)$")),
    ("manager", re.compile(r"\bi (?:now )?report (?:directly )?to (?P<v>[\w\s'.-]{2,40}?)$")),
    ("manager", re.compile(r"^(?P<v>[\w'.-]+(?: [\w'.-]+)?) is my (?:new )?(?:manager|boss|line manager|team lead|"
                           r"supervisor)$")),
)
_MEETING_KINDS = (r"(?:standup|stand-up|stand up|meeting|sync|retro|retrospective|1:1|one-on-one|check-in|call|class|"
                  r"lesson|practice|training|review|demo|planning|lunch|game|match|club|session)")
_MEETING_EN = re.compile(
    r"(?:^|\b(?:the|our|my) )(?P<k>(?:[\w-]+ ){0,2}?" + _MEETING_KINDS + r")"
    r" (?:is|are|will be|happens|is held|takes place|has been|was|got|has|moved|changed|meets)\b(?P<v>.*)$")
_MEETING_MOVED_EN = re.compile(
    r"\b(?:moved|changed|shifted|rescheduled|pushed|switched) (?:the|our|my) (?P<k>(?:[\w-]+ ){0,2}?" + _MEETING_KINDS
    + r") (?:to|back to|forward to) (?P<v>.*)$")
_FAVOURITE_EN = re.compile(r"\bmy (?:new )?(?:all-time )?favou?rite (?P<k>[\w-]+(?: [\w-]+)?) is (?P<v>[\w\s'.-]{2,40}?)$")

_ZH_V = r"(?P<v>[\u3400-\u9fff\w·]{1,20}?)"
_ZH_WHEN = (r"(?:上上?个?月|去年|今年|前年|上周|这周|本周|下周|下个?月|最近|刚刚?|年初|年底|"
            r"\d{1,2}月(?:份)?|[一二三四五六七八九十]+月(?:份)?)?")
_SLOTS_ZH: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("team", re.compile(r"我(?:们)?" + _ZH_WHEN + r"(?:调到|转到|加入|去|在)" + _ZH_V + r"(?:组|团队|部门|小组)")),
    ("residence", re.compile(r"我(?:们|们家|家)?" + _ZH_WHEN + r"(?:住在|住|搬到|搬去|搬家到|定居在|定居|落户)(?:在)?"
                             + _ZH_V + r"(?:住|了|啦|的|$)")),
    ("residence", re.compile(r"我(?:们)?家在" + _ZH_V + r"$")),
    ("employer", re.compile(r"我(?:在|去)" + _ZH_V + r"(?:工作|上班|任职|实习)")),
    ("employer", re.compile(r"我" + _ZH_WHEN + r"(?:入职|加入|跳槽到|跳槽去)(?:了)?" + _ZH_V + r"$")),
    ("manager", re.compile(r"我(?:的)?(?:新)?(?:领导|老板|经理|上司|主管|组长|直属领导)(?:换成|是|叫|变成)" + _ZH_V + r"$")),
    ("manager", re.compile(r"我(?:直接)?向" + _ZH_V + r"汇报")),
    ("manager", re.compile(r"^" + _ZH_V + r"是我(?:的)?(?:新)?(?:领导|老板|经理|上司|主管|组长)$")),
)
_MEETING_ZH = re.compile(r"(?P<k>周会|例会|站会|晨会|组会|周例会|复盘会|早会|夕会|双周会|月会|读书会|[\u3400-\u9fff]{1,4}课)"
                         r"(?:时间)?[^，。]{0,8}?(?:改到|挪到|调到|换到|推迟到|提前到|定在|改在|改成|在|是)(?P<v>.+)$")
_FAVOURITE_ZH = re.compile(r"我最(?:喜欢|爱)的(?P<k>[\u3400-\u9fff]{1,4})是" + _ZH_V + r"$")
_TIME_TOKEN = re.compile(r"\d{1,2}(?::\d{2})?\s*(?:am|pm)?|noon|midday|morning|afternoon|evening|monday|tuesday|"
                         r"wednesday|thursday|friday|saturday|sunday|room\s*\w+|周[一二三四五六日天]|星期[一二三四五六日天]|"
                         r"上午|下午|晚上|早上|中午|[一二三四五六七八九十两]+点(?:半)?|\d+点(?:半)?|\w*会议室")

_GENERIC_MEETING = frozenset("team daily weekly usual regular morning afternoon evening monthly".split())

# what a words search may add so that a changed slot finds the memory it changes
SLOT_WORDS = {"residence": "live lives living moved home based 住 搬 家", "employer": "work works job joined 工作 上班 入职",
              "manager": "manager boss report lead 领导 老板 经理 汇报", "team": "team 团队 组 部门"}


@dataclass(frozen=True)
class Slot:
    name: str  # residence, employer, manager, team, meeting:<which>, favourite:<what>
    value: str


def _normal_en(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    if "'" in t:
        for pattern, repl in _CONTRACTIONS:
            t = pattern.sub(repl, t)
    t = _FILLERS_EN.sub(" ", t)
    t = _PUNCT.sub(" ", t.replace("'s ", " ").replace("'", ""))
    return " ".join(t.split())  # runs of whitespace as one space, none at the ends


def _normal_zh(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold()
    t = _FILLERS_ZH.sub("", t)
    return _SPACE_PUNCT_ZH.sub("", t)


def _is_chinese(text: str) -> bool:
    return len(_CJK.findall(text)) >= max(2, len(_SPACE.sub("", text)) // 3)


def _words_of(normal: str) -> frozenset[str]:
    out = set()
    for w in normal.split():
        if w in _STOP_EN:
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return frozenset(out)


def _value_en(value: str) -> str:
    v = _TAIL_EN.sub("", " " + value.strip()).strip()
    return " ".join(w for w in v.split() if w not in _STOP_EN)


def _value_zh(value: str) -> str:
    return _TAIL_ZH.sub("", value.strip()).rstrip("的了住")


class Statement:
    """One statement's forms the rules compare, each worked out once when first asked for: a remember
    compares its text with up to eight memories, and each comparison asked for them again."""

    __slots__ = ("text", "_chinese", "_normal", "_words", "_slot")
    _UNSET: object = object()

    def __init__(self, text: str) -> None:
        self.text = text
        self._chinese: bool | None = None
        self._normal: str | None = None
        self._words: frozenset[str] | None = None
        self._slot: object = Statement._UNSET

    @staticmethod
    def of(said: str | Statement) -> Statement:
        return said if isinstance(said, Statement) else Statement(said)

    @property
    def chinese(self) -> bool:
        if self._chinese is None:
            self._chinese = _is_chinese(self.text)
        return self._chinese

    @property
    def normal(self) -> str:
        """Normalised as its language's rules read it (`_normal_zh` or `_normal_en`)."""
        if self._normal is None:
            self._normal = _normal_zh(self.text) if self.chinese else _normal_en(self.text)
        return self._normal

    @property
    def words(self) -> frozenset[str]:
        """Its content words as the English rules read them (`_words`), whatever its language."""
        if self._words is None:
            self._words = _words_of(_normal_en(self.text) if self.chinese else self.normal)
        return self._words

    @property
    def slot(self) -> Slot | None:
        if self._slot is Statement._UNSET:
            t = self.normal
            self._slot = None if _NEGATED.search(t) else (_slot_zh(t) if self.chinese else _slot_en(t))
        return self._slot  # type: ignore[return-value]


def slot(text: str | Statement) -> Slot | None:
    """The single-valued slot the statement fills, if the rules recognise one (never for a negation or
    a past state: "I no longer live in Berlin", "I used to work at Zeta")."""
    return Statement.of(text).slot


def _slot_en(t: str) -> Slot | None:
    for name, pattern in _SLOTS_EN:
        m = pattern.search(t)
        if m and (value := _value_en(m.group("v"))):
            return Slot(name, value)
    m = _FAVOURITE_EN.search(t)
    if m and (value := _value_en(m.group("v"))):
        return Slot("favourite:" + m.group("k"), value)
    m = _MEETING_EN.search(t) or _MEETING_MOVED_EN.search(t)
    if m:
        times = _TIME_TOKEN.findall(m.group("v"))
        if times:
            which = " ".join(w for w in m.group("k").replace("-", " ").split()
                             if w not in _STOP_EN and w not in _GENERIC_MEETING)
            return Slot("meeting:" + which.replace("stand up", "standup"), " ".join(re.sub(r"\s+", "", x) for x in times))
    return None


def _slot_zh(t: str) -> Slot | None:
    for name, pattern in _SLOTS_ZH:
        m = pattern.search(t)
        if m and (value := _value_zh(m.group("v"))):
            return Slot(name, value)
    m = _FAVOURITE_ZH.search(t)
    if m and (value := _value_zh(m.group("v"))):
        return Slot("favourite:" + m.group("k"), value)
    m = _MEETING_ZH.search(t)
    if m:
        times = _TIME_TOKEN.findall(m.group("v"))
        if times:
            return Slot("meeting:" + m.group("k"), " ".join(times))
    return None


def same_words(a: str | Statement, b: str | Statement) -> bool:
    """Both say the same words, fillers and function words aside (a duplicate at any slot or none)."""
    sa, sb = Statement.of(a), Statement.of(b)
    if sa.chinese != sb.chinese:
        return False
    if sa.chinese:
        na, nb = sa.normal, sb.normal
        if not na or not nb:
            return False
        if na == nb:
            return True
        ca, cb = set(na) - _LIGHT_ZH, set(nb) - _LIGHT_ZH  # the same characters, light ones aside
        return bool(ca) and ca == cb and len(ca) >= 3 and _same_order(na, nb, ca)
    wa, wb = sa.words - _LIGHT_EN, sb.words - _LIGHT_EN
    return bool(wa) and wa == wb


_VALUES_EN = re.compile(r"\d+(?:[:.,]\d+)*|(?<=\s)[A-Z][\w'’-]+|\b(?i:monday|tuesday|wednesday|thursday|friday|saturday|"
                        r"sunday|january|february|march|april|may|june|july|august|september|october|november|"
                        r"december|morning|afternoon|evening|night|tea|coffee)\b")
_VALUES_ZH = re.compile(r"\d+(?:[:.]\d+)?|[一二三四五六七八九十两]+|[周星期礼拜]{1,2}[一二三四五六日天]|[A-Za-z]+"
                        r"|上午|下午|晚上|早上")


def same_values(a: str, b: str) -> bool:
    """Both name the same numbers, names, days and times of day: what a rewording keeps and a change
    changes ("standup at 9:30" and "standup at 10:00" are alike in meaning, not the same). Meaning says a
    duplicate only where this holds (ADR 0041)."""
    if _is_chinese(a) != _is_chinese(b):
        return False
    pattern = _VALUES_ZH if _is_chinese(a) else _VALUES_EN
    return {v.casefold() for v in pattern.findall(a)} == {v.casefold() for v in pattern.findall(b)}


def _adds_nothing(new: Statement, old: Statement) -> bool:
    """Every content word (or character) of `new` is in `old`, in other words or an other order aside:
    "As I said before, I live in Porto" adds nothing to "I live in Porto"; "..., and I like it" does."""
    if new.chinese:
        theirs = old.normal if old.chinese else _normal_zh(old.text)
        return set(new.normal) - _LIGHT_ZH - _SAID_BEFORE_ZH <= set(theirs)
    return new.words - _LIGHT_EN - _SAID_BEFORE_EN <= old.words


_SAID_BEFORE_EN = {"said", "before", "told", "already", "again", "mentioned", "earlier", "reminder",
                   "currently", "still", "now", "actually"}
_SAID_BEFORE_ZH = set("说过之前前面提过跟你讲了已经再次还是现在")


def _same_order(a: str, b: str, chars: set[str]) -> bool:
    """The content characters read in the same order in both (我欠他 is not 他欠我)."""
    def order(t: str) -> str:
        return "".join(dict.fromkeys(c for c in t if c in chars))
    return order(a) == order(b)


def relate(new: str | Statement, old: str | Statement) -> str | None:
    """`duplicate`, `update` or None: how `new` stands to `old`, the person's own earlier statement.
    Give a `Statement` for a text compared more than once."""
    new, old = Statement.of(new), Statement.of(old)
    if same_words(new, old):
        return DUPLICATE
    a, b = new.slot, old.slot
    if a is None or b is None or not _same_slot(a.name, b.name):
        return None
    if a.value == b.value:  # the same value: a duplicate, unless the new one says more besides
        return DUPLICATE if _adds_nothing(new, old) else None
    va, vb = set(a.value.split()), set(b.value.split())
    if va <= vb or vb <= va:  # "Berlin" beside "a bigger flat in Berlin": both may be true
        return None
    return UPDATE


def _same_slot(a: str, b: str) -> bool:
    """One slot: the same name, or two meetings whose names agree ("the weekly planning meeting" and
    "weekly planning"; "team standup" and "standup")."""
    if a == b:
        return True
    if not (a.startswith("meeting:") and b.startswith("meeting:")):
        return False
    generic = {"meeting", "team", "daily", "weekly", "our", "the", "my"}
    wa, wb = set(a[8:].split()) - generic, set(b[8:].split()) - generic
    return bool(wa and wb) and (wa <= wb or wb <= wa)


def search_words(said: str | Statement) -> str:
    """The text, and the words of the slot it fills, so that a words search finds the memory a change
    changes ("I moved to Lisbon" finds "I live in Berlin")."""
    statement = Statement.of(said)
    text, found = statement.text, statement.slot
    if found is None:
        return text
    extra = SLOT_WORDS.get(found.name.split(":")[0], found.name.split(":", 1)[-1])
    return f"{text} {extra}"
