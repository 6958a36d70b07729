"""Sensitive content: health, finances, identity documents and people's contact details, EN and ZH.

A word alone rarely decides. Each rule is a term or a pattern plus what it needs around it:
- `strong` terms (named conditions, "diagnosed with", 确诊, card and ID numbers) need nothing more;
- `personal` terms ("surgery", "salary", 房贷) need a person in the same sentence (I, my, she, my
  wife, 小王 ...; "we" and "our" are left out, as in a business tool they mostly mean the company),
  and the money terms accept an amount instead;
and any match is dropped when the word only names a business thing ("the pregnancy app", "salary
field", 工资条导出功能), is a simile ("like therapy for me", 就像做了一次外科手术) or a fixed phrase
with another meaning ("technical debt", "the Great Depression", "pregnant pause").
Identity and account numbers are checked (Luhn, the Chinese ID checksum and birth date); phone
numbers, e-mail addresses and street addresses count as a person's only when nothing marks them
as a business line, a role mailbox or an office.
The labelled set in bench/data/sensitive/ measures the rules (bench/sensitive.py); see
docs/adr/0024-sensitive-rules.md for the figures and the known limits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

HEALTH, FINANCE, IDENTITY, CONTACT, PRIVATE = "health", "finance", "identity", "contact", "private_life"

# -- context ----------------------------------------------------------------------------------------

_PERSON_EN = re.compile(
    r"(?i:\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|he|he's|him|his|she|she's|her|hers|their|them|"
    r"wife|husband|partner|son|daughter|kids?|child|children|baby|mum|mom|mother|dad|father|parents?|"
    r"sister|brother|sibling|aunt|uncle|cousin|niece|nephew|grand(?:ma|pa|mother|father|parents?)|"
    r"friend|colleague|coworker|boss|neighbou?r|roommate|flatmate|fianc[ée]e?|girlfriend|boyfriend)\b)"
    r"|\b[A-Z][a-z]+'s\b|\b[A-Z][a-z]+\s+and\s+[A-Z][a-z]+\b",  # ... or two people named together
)
_SURNAMES = (
    "王李张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕苏卢蒋蔡贾丁魏薛叶"
    "余潘杜戴夏钟汪田任姜范方石姚谭廖邹熊金陆郝孔白崔康毛邱秦江史顾侯邵孟龙万段钱汤尹黎易常武乔贺赖龚文"
)
_PERSON_ZH = re.compile(
    r"我(?!们)|[他她](?!们)|妈|爸|父亲|母亲|老婆|老公|妻子|丈夫|爱人|儿子|女儿|孩子|宝宝|哥|姐|弟|妹|爷爷|奶奶|"
    r"外公|外婆|姥姥|婆婆|公公|岳父|岳母|叔|阿姨|舅|同事|朋友|室友|邻居|领导|老板|经理|老师|先生|女士|"
    rf"[小老][{_SURNAMES}](?![区时组学])"
)

_AMOUNT_EN = re.compile(
    r"[$£€¥]\s?\d|\b\d[\d,.]*\s?(?:k|grand|thousand|million|bn|dollars|pounds|euros|quid|bucks)\b"
    r"|\b\d{1,3}(?:,\d{3})+\b|\b\d[\d,.]*\s+(?:a|per)\s+(?:year|month|week)\b"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
    r"ninety|a|hundred)[\s-]+(?:hundred[\s-]+)?(?:thousand|grand|million)\b",
    re.IGNORECASE,
)
_AMOUNT_ZH = re.compile(r"(?:\d[\d,.]*|[一二两三四五六七八九十百]+)\s*多?\s*(?:万|千|块|元|k|K)")

# A word that names a business thing rather than a person's state: "the pregnancy app", "salary field".
_BUSINESS_EN = re.compile(
    r"^(?:[\s-]+(?!(?:at|the|a|an|in|on|for|to|of|with|and|or|my|his|her|their|our|is|was|from|by|last|this|next)\b)"
    r"[\w'-]+){0,2}?[\s-]+(?:apps?|api|apis|features?|modules?|projects?|pages?|systems?|platforms?|portals?|"
    r"products?|vendors?|suppliers?|clients?|customers?|compan(?:y|ies)|charit(?:y|ies)|clinics?|groups?|chains?|"
    r"teams?|director(?:y|ies)|sites?|websites?|fields?|columns?|tables?|calculators?|dashboards?|brokers?|"
    r"research|software|services?|sectors?|industry|markets?|startups?|providers?|integrations?|tools?|forms?|"
    r"templates?|models?|endpoints?|schemas?|database|exports?|imports?|workflows?|deadlines?|contracts?|"
    r"campaigns?|stud(?:y|ies)|trials?|devices?|tracker|scheduling|booking|billing|reports?|chatbot|bot|"
    r"foundation|association|society|organi[sz]ation|nonprofit|ngo|brands?|landing\s+page|hospitals?|studios?|gyms?|"
    r"cent(?:re|er)s?|practices?|wholesalers?|agenc(?:y|ies))\b",
    re.IGNORECASE,
)
_BUSINESS_ZH = re.compile(
    r"^[^，。,.;；!?！？]{0,4}?(?:功能|系统|模块|接口|页面|项目|平台|App|APP|app|应用|产品|客户|行业|排程|排期|计算器|审批|"
    r"提醒|导出|发放|库存|对接|模型|软件|网站|机构|公司|连锁|字段|报表|市场|小程序|服务商|供应商|数据|查询|"
    r"组织|基金会|协会|学会|公益|一列|那列|这列|栏位|医院|诊所|中心|馆|工作室|品牌|利率|政策|行情|信息)"
)
_SIMILE_EN = re.compile(r"\b(?:like|as if|as though|kind of|sort of)\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
_SIMILE_ZH = re.compile(r"(?:像|好比|如同|仿佛|似的|宛如)[^，。,.]{0,8}$")

# Fixed phrases whose sensitive-looking word means something else.
_IDIOMS = re.compile(
    r"\b(?:technical|tech|design|code)\s+debt|\bdebt\s+(?:of\s+gratitude)|"
    r"\b(?:great|economic|tropical)\s+depression|\bdepression\s+in\s+the\b|"
    r"\bretail\s+therapy|\bpregnant\s+(?:pause|silence)|\ba\s+stroke\s+of\b|\bsober(?:ing)?\s+(?:look|assessment|reminder)|"
    r"\b(?:is|was|are|'s)\s+(?:\w+\s+){0,2}(?:my|our|his|her|the\s+best)\s+(?:kind\s+of\s+|form\s+of\s+)?therapy|"
    r"\b(?:work|hard\s+work|effort|efforts|practice|patience|training|gamble|risk|it\s+all|everything|that|it)\s+"
    r"(?:\w+\s+)?(?:paid|pays|paying|has\s+paid|finally\s+paid)\s+off|"
    r"\b(?:work(?:s|ed|ing)?|careers?|jobs?|studying|study|studies|degree|course|volunteer(?:s|ed|ing)?|charit(?:y|ies)|"
    r"awareness|policy|campaigns?|specialise|specialize)\s+(?:\w+\s+){0,2}(?:in|on|for|about|with)\s+mental\s+health|"
    r"\bmental\s+health\s+(?:awareness|services?|charit(?:y|ies)|nurse|nursing|team|policy|week|day|month|first\s+aid|"
    r"support\s+workers?|sector|field|careers?|apps?|professionals?|training|workshop)|"
    r"\b(?:warms?|warmed|warming|melts?|melted|stole|stolen|steals?|broke|breaks?|broken|poured|pours?|pouring|"
    r"capture[ds]?|won)\s+(?:\w+\s+)?(?:my|his|her|their|our)\s+hearts?|\b(?:my|his|her|our)\s+heart\s+(?:is|was|'s)\s+"
    r"(?:so\s+|just\s+|really\s+)?(?:full|melting|broken|in\s+it|set\s+on)|\bheart\s+(?:goes|went)\s+out|"
    r"\bfrom\s+the\s+bottom\s+of\s+(?:my|our)\s+heart|\b(?:owe|owes|owed)\s+(?:you|me|him|her|them|us)\s+"
    r"(?:one|big\s+time|a\s+lot\s+for\s+this|a\s+(?:(?:bottle|glass|cup|box|slice|piece)\s+of\s+\w+|coffee|drink|beer|pint|lunch|dinner|favou?r|round|"
    r"big\s+one|cake|meal|visit|call|hug|thank[\s-]you)|an\s+(?:apology|explanation))|"
    r"\b(?:gave|give|gives|giving)\s+(?:me|us|him|her|them|everyone)\s+(?:a\s+)?(?:heart\s+attack|migraine|ulcer)|"
    r"\b(?:nearly|almost)\s+had\s+a\s+heart\s+attack|\b(?:is|was|are|like)\s+a\s+cancer\b|\ba\s+cancer\s+(?:on|in|to)\b|"
    r"\bfell\s+on\s+deaf\s+ears|\bturn(?:ed|ing)?\s+a\s+blind\s+eye|\bblind\s+spots?|\bdouble[\s-]blind|"
    r"\bblind\s+(?:review|test)|\bbitter\s+pill|\bon\s+life\s+support|"
    r"\b(?:articles?|books?|documentar(?:y|ies)|podcasts?|news|papers?|talks?|lectures?|films?|movies?|shows?|"
    r"episodes?|series|courses?|webinars?|pieces?|essays?|stor(?:y|ies)|thesis|dissertation|assignments?|memoirs?|"
    r"blog\s+posts?|columns?|presentations?|interviews?|chapters?)\s+(?:\w+\s+){0,4}(?:about|on)\s+(?:[\w&]+\s+){0,6}[\w&]+|"
    r"\b(?:reading|read|learning|learnt|learned|heard)\s+about\s+[^.]{0,60}|"
    r"\b(?:read|saw|watched|heard)\s+(?:an?|the|this|that|some)\s+(?:\w+\s+)?(?:article|post|piece|thread|video|"
    r"podcast|study|report)\b[^.]{0,80}|\b(?:accurate|realistic|true\s+to\s+life)\s+about\s+\w+|"
    r"\bspeciali[sz](?:e|es|ed|ing)\s+in\s+[^.]{0,40}|"
    r"[^。]{0,8}(?:播客|节目|视频|文章|博主|主播|公众号|课上|课里)[^。，,]{0,6}(?:讲|说|提到|介绍)[^。]*|"
    r"[得把]我?的?血压[^，。,.]{0,2}(?:上来|飙|升|拉满|爆)|"
    r"\b(?:debt|money|loans?|credit|cancer|therapy)\s+(?:is|was|are)\s+(?:just\s+)?like\b|"
    r"(?:负债|欠债|贷款|钱|癌)[^，。,.]{0,2}就像|赚钱机器|"
    r"\bnurs(?:e|ing)\s+(?:practitioner\s+)?(?:degree|school|course|training|program(?:me)?|exams?|jobs?|shifts?)|"
    r"(?:理财|金融|财务|投资)课|\bwhere\s+you\s+(?:\w+\s+){0,2}"
    r"(?:pay|save|borrow|owe|invest)\b|"
    r"(?:有|很多|不少|一些|听)(?:医生|专家|人)(?:说|建议|讲)|(?:差点|快要?|都要|简直要)?(?:把我)?气(?:出|得)"
    r"(?:心梗|心脏病|高血压|脑溢血|病|内伤|乳腺增生)|"
    r"(?:想做|想当|想从事|从事|学的是|读的是|专业是?|报的是|报考|考研考)[^，。,.]{0,6}(?:心理咨询|心理治疗|心理学|护理|临床|医学|药学)|"
    r"关于[^，。,.]{0,10}(?:文章|书|新闻|报道|纪录片|讲座|研究|课程|视频|论文)|"
    r"\b(?:is|was|works\s+as|worked\s+as|as)\s+an?\s+(?:\w+\s+)?(?:nurse|doctor|surgeon|therapist|midwife|pharmacist|"
    r"dentist|psychiatrist|psychologist|paramedic|physio|gp|counsell?or|carer)\b|"
    r"是[^，。,.]{0,4}(?:护士|医生|大夫|药剂师|牙医|心理咨询师|护工)|当[^，。,.]{0,2}(?:护士|医生)|"
    r"对症下药|良药|病毒|毛病|病句|语病|通病|弊病|职业病|拖延症|选择困难症|尴尬症|懒癌|症结|打[个一]?预防针|强心剂|"
    r"(?:就是|是)[^，。,.]{0,6}(?:心理治疗|心理疗法|疗愈|良药|解药)|"
    r"\bdoctor[\s-]+(?:turned[\s-]+\w+\s+)?(?:friends?|neighbou?rs?|colleagues?|cousins?|brother|sister|uncle|aunt|"
    r"dad|mum|mom|wife|husband|partner)\b|诊断日志|故障诊断|性能诊断|问题诊断|"
    r"(?:technical|tech)\s+(?:loan)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    needs: str = "nothing"  # "nothing", "person", "person_or_amount" or "amount"
    check: Callable[[re.Match[str]], bool] | None = None
    statement: bool = False  # a verb phrase ("diagnosed", 欠了): never just the name of a business thing
    # the same pattern without IGNORECASE, for the lowercased segment: Python's matcher is several times
    # faster without case folding, which counts in an 8 KiB text (an English terms rule, no capitals)
    folded: re.Pattern[str] | None = None

    def finditer(self, segment: str, lowered: str | None) -> Iterator[re.Match[str]]:
        """Matches in `segment`; `lowered` is `segment.lower()` when that has the same length (so
        offsets agree), used by the folded pattern. A match found there reads lowercased text."""
        if self.folded is not None and lowered is not None:
            return self.folded.finditer(lowered)
        return self.pattern.finditer(segment)


# -- a first-character prefilter ----------------------------------------------------------------------
# Python's matcher tries every alternative of a long alternation at every position of the text; the
# Chinese rules' alternations cost milliseconds on an 8 KiB English text where none can start. A
# lookahead on the characters a match can start with lets it skip those positions at the speed of a
# character class. The class is read off the pattern's own parse; where it cannot be told for sure
# (a match may be empty, or start with any character or a negated set), no prefilter; nor where the
# matcher finds a literal prefix or a first-character set of its own (it skips ahead faster then).

_CATEGORIES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
               "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _first(items: list[tuple[Any, Any]]) -> tuple[list[str], bool] | None:
    """The characters a match of this parsed sequence can start with, as the items of a character class
    (`a`, `a-z`, `\\d`), and whether it can match empty; None when that cannot be told here."""
    from re import _constants as c  # type: ignore[attr-defined]

    firsts: list[str] = []
    for op, av in items:
        if op is c.LITERAL:
            return [*firsts, re.escape(chr(av))], False
        if op is c.IN:
            chars: list[str] = []
            for kind, value in av:
                if kind is c.LITERAL:
                    chars.append(re.escape(chr(value)))
                elif kind is c.RANGE:
                    chars.append(f"{re.escape(chr(value[0]))}-{re.escape(chr(value[1]))}")
                elif kind is c.CATEGORY and str(value) in _CATEGORIES:
                    chars.append(_CATEGORIES[str(value)])
                else:  # NEGATE, or what this does not know: not told here
                    return None
            return firsts + chars, False
        if op is c.AT or op in (c.ASSERT, c.ASSERT_NOT):
            continue  # zero-width: what follows starts the match
        if op is c.SUBPATTERN:
            _group, add_flags, _del_flags, sub = av
            if add_flags & re.IGNORECASE:
                return None
            found = _first(list(sub))
        elif op is c.BRANCH:
            found_all = [_first(list(branch)) for branch in av[1]]
            known = [f for f in found_all if f is not None]
            if len(known) < len(found_all):
                return None
            found = ([r for f in known for r in f[0]], any(f[1] for f in known))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            low, _high, sub = av
            inner = _first(list(sub))
            found = None if inner is None else (inner[0], inner[1] or low == 0)
        else:  # ANY, NOT_LITERAL, group references, ...: not told here
            return None
        if found is None:
            return None
        firsts += found[0]
        if not found[1]:
            return firsts, False
    return firsts, True


def _prefiltered(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The same pattern behind a lookahead on the characters its matches start with, when those can be
    told; the pattern itself otherwise. Same matches, same spans, same groups."""
    if pattern.flags & re.IGNORECASE:
        return pattern
    try:
        from re import _compiler, _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern.pattern, pattern.flags)
        if _compiler._get_literal_prefix(parsed, pattern.flags)[0] or _compiler._get_charset_prefix(
                parsed, pattern.flags) is not None:
            return pattern  # the matcher skips ahead on its own, faster than behind a lookahead
        found = _first(list(parsed))
    except Exception:  # noqa: BLE001 - the parser is the interpreter's own, not a promise: no prefilter
        return pattern
    if found is None or found[1] or not found[0]:
        return pattern
    return re.compile(f"(?=[{''.join(sorted(set(found[0])))}])(?:{pattern.pattern})", pattern.flags)


def _en(kind: str, body: str, needs: str = "nothing", statement: bool = False) -> _Rule:
    lowercase = not any(c.isupper() for c in re.sub(r"\\[A-Za-z]", "", body))  # escapes such as \S aside
    return _Rule(kind, re.compile(rf"\b(?:{body})\b", re.IGNORECASE), needs, statement=statement,
                 folded=_prefiltered(re.compile(rf"\b(?:{body})\b")) if lowercase else None)


def _zh(kind: str, body: str, needs: str = "nothing", statement: bool = False) -> _Rule:
    return _Rule(kind, _prefiltered(re.compile(body)), needs, statement=statement)


# -- numbers that are checked, not just matched -----------------------------------------------------

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def _cn_id_valid(match: re.Match[str]) -> bool:
    digits = match.group().upper()
    try:
        date(int(digits[6:10]), int(digits[10:12]), int(digits[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(digits[:17], _ID_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == digits[17]


def _luhn_valid(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group())
    if not 13 <= len(digits) <= 19:
        return False
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_REFERENCE_BEFORE = re.compile(
    r"(?:order|invoice|ticket|tracking|reference|ref|booking|shipment|parcel|case|serial|po|订单|单号|工单|快递|发票|编号|"
    r"参考号|流水号|合同号|批次|序列号|运单)"
    r"[^.。;；]{0,12}$", re.IGNORECASE)


def _card_number(match: re.Match[str]) -> bool:
    """Luhn-valid, and not an order, ticket or tracking number (a tenth of those pass Luhn by chance)."""
    return _luhn_valid(match) and not _REFERENCE_BEFORE.search(match.string[: match.start()])


def _document_number(match: re.Match[str]) -> bool:
    """A document's number, not a figure that happens to follow the word ("the NHS is short of 40,000 nurses")."""
    for run in re.finditer(r"(?:\b[A-Za-z]{1,2}\s+)*(?:[A-Za-z0-9-]*\d[A-Za-z0-9-]*)(?:\s+(?:[A-Za-z0-9-]*\d[A-Za-z0-9-]*|"
                           r"[A-Za-z]{1,2}\b))*", match.string[match.start():match.start() + 90].split(";")[0]):
        at = match.start() + run.start()  # (in the words that follow the document's name)
        if len(re.sub(r"[^A-Za-z0-9]", "", run.group())) >= 5 and match.string[at - 1:at] not in (",", "."):
            return True  # "QQ 12 34 56 C", "MORGA753116SM9IJ"; not the "000" of "40,000 nurses"
    return False


def _business_line_before(text: str, start: int) -> bool:
    return bool(re.search(r"(?:support|help|service|hotline|helpline|sales|reception|front desk|switchboard|office|"
                          r"toll[- ]free|客服|热线|服务|总机|前台|官方|售后)[^.。;；]{0,25}$", text[:start], re.IGNORECASE))


_ROLE_MAILBOX = re.compile(
    r"^(?:support|info|sales|help|hello|contact|admin|noreply|no-reply|team|hr|billing|office|jobs|careers|press|"
    r"security|service|services|kefu|marketing|ops|dev|feedback|enquiries|inquiries|orders|invoices?|accounts|legal|"
    r"finance|payroll|procurement|privacy|compliance|it|helpdesk|recruiting|recruitment|partners|media|events|"
    r"webmaster|postmaster|abuse|notifications?|alerts?|reply|mail)@",
    re.IGNORECASE,
)

# -- the rules ----------------------------------------------------------------------------------------

_CONDITIONS_EN = (
    r"diabet(?:es|ic)|cancer|tumou?rs?|leuka?emia|lymphoma|hiv|asthma|epilep(?:sy|tic)|seizures?|dementia|"
    r"alzheimer'?s|parkinson'?s|autis(?:m|tic)|adhd|ocd|ptsd|bipolar|schizophreni\w*|depression|"
    r"anxiety\s+(?:disorder|attacks?|medication)|social\s+anxiety|eating\s+disorder|anorexi\w*|bulimi\w*|"
    r"migraines?|arthritis|hypertension|pneumonia|heart\s+(?:attack|disease|condition|failure)|"
    r"(?:a|minor|mild|major)\s+stroke(?!\s+of)|multiple\s+sclerosis|hepatitis|tuberculosis|long\s+covid|insomnia|"
    r"endometriosis|(?:herniated|slipped)\s+disc|concussion|(?:kidney|liver)\s+(?:disease|failure|stones?)|"
    r"thyroid|cholesterol|blood\s+(?:pressure|sugar)|mental\s+health|panic\s+attacks?|addiction|alcoholi(?:sm|c)|"
    r"self[\s-]harm|suicid\w*|miscarriage|stillbirth|infertil\w*|fertility\s+treatment|ivf|pregnan(?:t|cy)|"
    r"chemo\w*|radiotherapy|dialysis|"
    r"(?:(?:my|his|her|their)\s+(?:\w+\s+)?|(?:see|saw|seeing|sees|visit(?:ed|ing)?|referred\s+to|booked)\s+(?:a|an|the)\s+)"
    r"(?:psychiatrist|psychologist|oncologist|cardiologist|neurologist|gynaecologist|gynecologist|obstetrician)|"
    r"psychiatric\s+(?:ward|unit|hospital|care|help|nurse|assessment)|oncology\s+(?:appointment|ward|clinic|results?)|"
    r"(?:mri|ct|pet)\s+scan|(?:my|his|her|the)\s+mri|biops(?:y|ies)|blood\s+tests?|x-rays?|"
    r"(?:hip|knee|joint)\s+replacement|transplant|hospitali[sz]ed|in\s+(?:the\s+)?hospital|"
    r"admitted\s+to\s+(?:the\s+)?hospital|"
    r"(?:months|years|weeks|days)\s+sober|(?:stay|staying|been|getting)\s+sober|diagnosed|"
    r"(?:nervous|mental)\s+breakdown|on\s+the\s+pill|inhalers?|epipen|wheelchair|hearing\s+aids?|pacemaker|"
    r"\w+(?:oscopy|ectomy|otomy)|(?:broke|broken|fractured|sprained|dislocated|torn|tore)\s+(?:my|his|her|a|the)?\s*"
    r"(?:left\s+|right\s+)?(?:wrist|arm|leg|ankle|foot|hand|finger|toe|hip|knee|neck|shoulder|collarbone|ribs?|nose|jaw|"
    r"elbow|ligament|acl|hamstring|achilles|meniscus|pelvis)|"
    r"alzheimer'?s|ana?emia|angina|apno?ea|arrhythmia|atrial\s+fibrillation|bronchitis|cataracts?|cerebral\s+palsy|"
    r"chronic\s+(?:fatigue|pain|illness|condition)|cirrhosis|c[oe]eliac|colitis|copd|crohn'?s|cystic\s+fibrosis|"
    r"deafness|(?:partially|profoundly|completely)\s+(?:deaf|sighted|blind)|deaf\s+in|hard\s+of\s+hearing|"
    r"visually\s+impaired|(?:colou?r|legally)\s+blind|dermatitis|down'?s?\s+syndrome|dyslexi[ac]|dyspraxi[ac]|eczema|"
    r"fibromyalgia|gallstones|glaucoma|gout|haemorrhoids|hemorrhoids|hernia|herpes|huntington'?s|"
    r"hypo-?thyroidism|hyper-?thyroidism|(?:under|over)active\s+thyroid|ibs|incontinen\w+|lupus|lyme|"
    r"macular\s+degeneration|melanoma|meningitis|menopaus\w+|motor\s+neurone\s+disease|muscular\s+dystrophy|"
    r"narcolepsy|osteoporosis|paraly[sz]ed|pcos|(?:post-?natal|postpartum)\s+depression|psoriasis|sciatica|scoliosis|"
    r"shingles|sickle\s+cell|spina\s+bifida|blood\s+clots?|dvt|tinnitus|tourette'?s|ulcers?|vertigo|"
    r"(?:lactose|gluten|fructose)\s+intoleran\w+|"
    r"c-section|caesarean|cesarean|midwife|antenatal|prenatal|postnatal|maternity\s+ward|morning\s+sickness|"
    r"trimester|expecting\s+(?:a|our|their|his|her|my)\s+(?:first\s+|second\s+|third\s+)?(?:baby|child|twins)|"
    r"transfusion|stent|heart\s+bypass|ultrasound|mammogram|smear\s+test|stitches|fractures?|root\s+canal|"
    r"(?:chronic|long[\s-]term|underlying|medical|heart|skin|lung|kidney|liver|mental\s+health)\s+conditions?|"
    r"cluster\s+headaches|chronic\s+headaches|sepsis|stroke\s+unit|self[\s-]harming|eating\s+disorders?|"
    r"(?:my|his|her|their)\s+\w+olog(?:ist|y)\s+(?:appointment|clinic|consultant|results?)|benign|malignant|"
    r"appendicitis|burst\s+appendix|(?:since|after|before)\s+(?:the|his|her|my)\s+(?:stroke|operation|diagnosis|surgery)|"
    r"(?:my|his|her|their)\s+drinking|drink(?:ing)?\s+problem|(?:heart|blood\s+pressure|glucose)\s+monitor|"
    r"sectioned|heart\s+murmur|give\s+birth|gave\s+birth|giving\s+birth|nicotine\s+(?:patch|patches|gum)|"
    r"bad\s+back|scan\s+on\s+(?:my|his|her)\s+\w+|signed\s+(?:me|him|her)\s+off|"
    r"(?:my|his|her)\s+(?:liver|kidneys?|lungs?|heart|bowel|prostate|cervix|ovaries|spine)\s+(?:condition|problems?|"
    r"issues?|function|scans?|tests?|results?|surgery|operation|transplant|damage|disease|failure|cancer|valve|rate|"
    r"rhythm|specialist|doctor|consultant|(?:is|was|are)\s+(?:failing|damaged|enlarged|weak|bad|not\s+working))|"
    r"(?:appointment|check-?up|scans?|tests?|problems?|trouble|issues?|surgery|operation|something\s+wrong)\s+"
    r"(?:\w+\s+){0,2}(?:about|for|with|on|in)\s+(?:my|his|her)\s+(?:heart|lungs?|liver|kidneys?|bowel|prostate|spine)"
)
# Medicines by name: someone's own only when a person is in the sentence ("I'm on sertraline"); alone they are
# what a pharmacology student revises ("Metoprolol, atenolol, propranolol... they blur together")
_MEDICINES_EN = (
    r"antidepressants?|antibiotics|insulin|sleeping\s+pills|"
    r"sertraline|fluoxetine|prozac|zoloft|xanax|lexapro|citalopram|escitalopram|metformin|lisinopril|statins?|"
    r"atorvastatin|ritalin|adderall|methylphenidate|lithium|valium|diazepam|methadone|"
    r"beta[\s-]blockers|blood\s+thinners|warfarin|opioids|morphine|oxycodone|tramadol|levothyroxine|thyroxine|hrt|"
    r"contracepti\w+|birth\s+control|propranolol|omeprazole|ozempic|wegovy|mounjaro|melatonin|antipsychotics?|"
    r"mood\s+stabili[sz]ers?|benzodiazepines?|ssris?|naltrexone|(?<!meal\s)(?<!meal-)prep(?!\s+(?:time|work|day|list|school|cook))|methotrexate|immunotherapy|cpap|"
    r"\w{3,}(?:pril|olol|sartan|statin|prazole|oxetine|triptan|azepam|azolam|cycline|tinib|umab|ximab|pram|"
    r"tidine|dronate|formin|glitazone|gliptin|semide|thiazide|profen|codone|morphone)"
)
_PERSONAL_HEALTH_EN = (
    r"surgery|operation|medications?|meds|pills|prescri(?:bed|ptions?)|"
    r"doctor|gp|physio\w*|diagnos[ie]s|allerg(?:y|ies)|breakdown|sick\s+(?:leave|note)|off\s+sick|clinic|"
    r"side\s+effects|symptoms|recovery|relapse|treatment|disease|syndrome|disorder|infection|dose|dosage|"
    r"(?:my|his|her|their)\s+(?:anxiety|condition|illness|health|scan|scans|results)|(?:have|has|with)\s+anxiety|"
    r"deaf|blind|disabled|disability|painkillers|steroids|\w{4,}ologist|lumps?(?!\s+sum)|"
    r"(?!diagnosis|prognosis|osmosis|symbiosis|hypnosis|diploma|aroma|empathy|sympathy|apathy|antipathy|telepathy|"
    r"sonoma|oklahoma|tacoma|paloma|genoma)"
    r"\w{3,}(?:itis|i?asis|osis|oma|a?emia|pathy)|"
    r"(?:appendix|gallbladder|tonsils|wisdom\s+teeth|tooth|mole|cyst|lump|ovary|ovaries|uterus|kidney|spleen|"
    r"thyroid|polyps?)\s+(?:removed|out|taken\s+out)"
)
_ENGAGED_EN = (  # therapy and counselling someone is in, not the words as a topic or a career
    r"(?:my|his|her|their|in|into|start(?:ed|ing|s)?|begin|began|going\s+to|go\s+to|goes\s+to|went\s+to|seeing|see|saw|"
    r"sees|having|had|get(?:ting)?|got|need(?:s|ed)?|try(?:ing)?|tried|book(?:ed)?|waiting\s+for|referred\s+(?:me|him|her)"
    r"\s+(?:to|for)|recommended|doing|finished|stopped|quit)\s+(?:a\s+|an\s+|some\s+|the\s+|couples\s+|grief\s+|family\s+)?"
    r"(?:therap(?:y|ies|ist|ists)|counsell?(?:ing|or))"
)
_ALLERGENS = (
    r"penicillin|\w+cillin|\w+mycin|aspirin|ibuprofen|codeine|sulfa\w*|latex|nuts|peanuts|tree\s+nuts|shellfish|"
    r"seafood|fish|gluten|wheat|dairy|lactose|milk|eggs?|soy|sesame|bees?|wasps?|pollen|dust|cats?|dogs?|"
    r"antibiotics|anaesthetic|anesthetic|iodine|mango|kiwi|strawberries"
)
_CONDITIONS_ZH = (
    r"(?:甲状腺|肝|肾|心|肺)功能|确诊|诊断出|被诊断|查出|患有|患上|癌|肿瘤|糖尿病|高血压|低血压|心脏病|冠心病|抑郁症|抗抑郁|重度抑郁|焦虑症|抗焦虑|"
    r"哮喘|癫痫|自闭症|孤独症|多动症|失眠|肺炎|肝炎|乙肝|结节|脂肪肝|痛风|阿尔茨海默|老年痴呆|帕金森|双相|精神分裂|"
    r"强迫症|厌食症|暴食症|艾滋|HIV|椎间盘突出|骨折|中风|脑梗|心梗|贫血|甲亢|甲减|白血病|偏头痛|血糖|血压|血脂|胆固醇|"
    r"胰岛素|化疗|放疗|透析|降压药|安眠药|止痛药|激素药|抗生素|处方|住院|出院|重症监护|(?:去|进|送|挂|看|跑)了?急诊|心理医生|心理咨询|心理治疗|"
    r"精神科|病历|体检报告|复查|病假|产检|怀孕|孕期|孕\d+周|备孕|流产|试管婴儿|预产期|坐月子|戒酒|戒毒|"
    r"搭桥|切除|移植手术|康复治疗|做试管|促排|[胃肠喉鼻宫腔膀胱支气管]{1,4}镜|核磁共振|彩超|抽血|化验单|验血|"
    r"甲状腺|孕[早中晚]期|孕吐|孕妇|早孕|怀上|怀了|活检|穿刺|置换|肾上腺素|剖腹产|顺产|产后|产假|睡眠呼吸暂停|呼吸机|轮椅|助听器|起搏器|"
    r"耳聋|失聪|听力[^，。,.]{0,2}(?:不好|差|下降|受损|障碍)|视力[^，。,.]{0,2}(?:不好|差|下降|受损|障碍|模糊)|弱视|色盲|色弱|青光眼|白内障|黄斑|血栓|抗凝|硬化|"
    r"褪黑素|安眠|助眠|住进[^，。,.]{0,2}医院|进了医院|送[^，。,.]{0,2}医院|送医|急救|残疾|瘫痪|截肢|"
    r"不耐受|麻醉|输液|打点滴|缝针|拆线|石膏|(?<!心)理疗|自残|自伤|自杀|轻生|根管|拔牙|做[^，。,.]{0,4}手术|动手术|开刀|"
    r"针灸治疗|康复训练|月经|痛经|更年期|不孕|避孕|性病|梅毒|疱疹"
)
_PERSONAL_HEALTH_ZH = (
    r"吃[^，。,.]{0,6}药|服药|用药|药物|打针|手术|医生[说让给开建]|看医生|看病|医院[检复治看做]|过敏性|过敏体质|"
    r"生病|病了|发病|犯病|发作|症状|打[^，。,.]{0,5}针|CT|B超|做[^，。,.]{0,4}治疗|[康理治]疗师|康复师|医师|"
    r"扁桃体|阑尾|胆囊|子宫|卵巢|前列腺|乳腺|脊椎|腰椎|颈椎|肝脏|肾脏|脾脏|胰腺|结肠|直肠|"
    r"[\u4e00-\u9fff]{1,4}(?:炎|溃疡|结石|增生|囊肿|疱疹|疹|综合征|综合症|后遗症|障碍|震荡|杂音|泻)|手抖|"
    r"[\u4e00-\u9fff]{1,4}(?:普利|洛尔|沙坦|他汀|拉唑|西汀|曲坦|西泮|唑仑|环素|替尼|单抗|普兰|替丁|双胍|霉素|西林|他定|利嗪)|"
    r"贴片|[腰背腿膝颈肩胃心肝肾肺][^，。,.]{0,2}不好|(?:耳朵|眼睛)[^，。,.]{0,3}(?:听不见|看不见|看不清)|"
    r"[\u4e00-\u9fff]{1,3}(?:症|病)(?![毒句历])"
)
_ALLERGENS_ZH = (
    r"青霉素|头孢|阿司匹林|花生|坚果|海鲜|贝类|甲壳类|鱼类?|虾|蟹|芒果|花粉|猫毛|狗毛|尘螨|蜂蜇|蜜蜂|黄蜂|蜂|酒精|乳糖|牛奶|鸡蛋|麸质|小麦|"
    r"大豆|芝麻|乳胶|[\u4e00-\u9fff]{1,3}[素药]"
)

_RULES: list[_Rule] = [
    # health
    _Rule(HEALTH, re.compile(r"\b(?:has|have|had|with|diagnosed\s+with)\s+MS\b")),
    _en(HEALTH, _CONDITIONS_EN),
    _en(HEALTH, _PERSONAL_HEALTH_EN, "person"),
    _en(HEALTH, _MEDICINES_EN, "person"),
    _en(HEALTH, r"intensive\s+care|icu|a&e|emergency\s+room|rehab", "person"),  # not "A&E sounds intense"
    _en(HEALTH, rf"(?:on|taking|takes|take|took|started|starting|stopped|prescribed|given)\s+(?:\w+\s+)?(?:{_MEDICINES_EN})"),
    _en(HEALTH, _ENGAGED_EN, "person"),
    _en(HEALTH, rf"allergic\s+to\s+(?:\w+\s+)?(?:{_ALLERGENS})"),
    _zh(HEALTH, _CONDITIONS_ZH),
    _zh(HEALTH, _PERSONAL_HEALTH_ZH, "person"),
    _zh(HEALTH, r"(?:要|得|刚|去|准备|约了|排了)(?:做|动)[^，。,.]{0,12}手术|(?:医生|大夫)[^。]{0,10}开了|"
                r"每天(?:吃|服)[一两半\d]+(?:片|粒|颗)", statement=True),
    _zh(HEALTH, rf"对(?:{_ALLERGENS_ZH})(?:[^，。,.]{{0,2}})过敏"),
    _zh(HEALTH, rf"(?:{_ALLERGENS_ZH})过敏", "person"),
    # finances
    _en(FINANCE,
        r"bankrupt\w*|overdrawn|overdraft|payday\s+loans?|defaulted|default(?:ed)?\s+on|arrears|"
        r"credit\s+(?:score|rating|report|history)|child\s+support|alimony|"
        r"behind\s+on\s+(?:my\s+|the\s+|our\s+)?(?:rent|mortgage|payments|bills|repayments)|in\s+debt|debts|"
        r"student\s+loans?|(?:credit\s+card|card|gambling|personal|medical)\s+debt|net\s+worth|pension\s+pot|"
        r"pay\s*slips?|pay\s*(?:rise|raise)|take[\s-]home\s+pay|debt\s+collectors?"),
    _en(FINANCE,
        r"salar(?:y|ies)|wages?|earn(?:s|ed|ing)?|income|savings|mortgage|loans?|debt|owe[sd]?|owing|"
        r"borrowed|pension|lost\s+(?:\w+\s+){0,3}money|pay(?:ing)?\s+(?:it\s+)?back|pay(?:ing)?\s+off|paid\s+off|"
        r"(?:am|'m|is|are|get|gets|got)\s+paid|take[\s-]home(?:\s+(?:pay|is|was))|pays|paying\s+me|i'?m\s+on\s+[$£€]?\d|borrow(?:ed|ing)?\s+(?:\w+\s+)?(?:money|cash|from)|amex|mastercard|visa\s+(?:card|debit|credit|number|ending)",
        "person_or_amount"),
    _en(FINANCE, r"(?:i'm|i\s+am|he's|she's|we're|they're)\s+(?:completely\s+|totally\s+|flat\s+|always\s+)broke"
                 r"(?!\s+(?:my|his|her|their|the|a|it|down|this|till|until|lol))|(?:can't|cannot|couldn't)\s+(?:afford|pay)\s+(?:the\s+|my\s+)?(?:rent|bills|mortgage)"
                 r"|(?:my|his|her|their)\s+rent|maxed\s+out|universal\s+credit|(?:on|claiming)\s+(?:benefits|welfare)|"
                 r"(?:to\s+)?cover\s+(?:the|my|our)\s+(?:bills|rent)|make\s+ends\s+meet|"
                 r"struggling\s+(?:to\s+pay|with\s+money|financially)|(?:\w+\s+)?payments?\s+behind|"
                 r"behind\s+on\s+(?:my\s+|the\s+|our\s+)?(?:\w+\s+)?(?:finance|loan|card|repayments|tax)|"
                 r"living\s+on\s+(?:credit\s+cards?|my\s+overdraft|loans)|(?:can't|cannot|couldn't)\s+pay\s+(?:it|them|this)|"
                 r"\biva\b|ccjs?|county\s+court\s+judge?ments?|(?:my|his|her|their)\s+credit\s+(?:is|was)|hard\s+up|"
                 r"strapped\s+for\s+cash|(?:us(?:e|ed|ing)|rel(?:y|ied|ying)\s+on|go(?:ing)?\s+to|went\s+to|need(?:ed)?)\s+(?:the\s+|a\s+)?food\s+banks?|food\s+stamps|unemployment\s+benefits?|(?:applied|signed\s+up|claim(?:ed|ing)?|on)\s+(?:for\s+)?unemployment|jobseeker'?s|sav(?:e|ed|ing)\s+(?:up\s+)?[$£€]?\d+",
        statement=True),
    _en(FINANCE, r"(?:account|acct|card|routing|sort|iban|swift|bic)\s*(?:number|no\.?|code|#)?\s*(?:is|:|,)?\s*\d[\d -]{3,}"),
    _en(FINANCE, r"(?:ending|ends)\s+(?:in\s+|with\s+)?\d{4}"),
    _Rule(FINANCE, re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)"), check=_card_number),
    _Rule(FINANCE, re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,4})?(?![A-Za-z0-9])")),
    _zh(FINANCE,
        r"征信|负债|欠款|欠债|债务重组|网贷|花呗|借呗|白条|破产|"
        r"(?:还款|账单|贷款|房贷|车贷|信用卡)[^，。,.]{0,4}逾期|逾期[^，。,.]{0,2}(?:记录|还款)|助学贷款|"
        r"(?:信用卡|卡)[^，。,.]{0,2}(?:欠|账单|额度)|降薪|减薪"),
    _zh(FINANCE,
        r"工资|薪水|薪资|月薪|年薪|底薪|收入|存款|积蓄|公积金|房贷|车贷|贷款|亏了|赚了|借了|理财|股票|到手|"
        r"房租|月租|首付|补税|退税|社保|储蓄|抵押|挣得?|赚得?",
        "person_or_amount"),
    _zh(FINANCE, r"涨薪|加薪|调薪|年终奖|奖金|提成", "amount"),
    _en(FINANCE, r"bonus(?:es)?", "amount"),
    _zh(FINANCE, r"欠了|还欠|欠[^，。,.]{0,6}(?:钱|银行|信用卡|花呗|借呗|网贷|万|千|块)|还不上|[交还付]不起|手头[^，。,.]{0,2}紧|"
                 r"破产了|刷爆|透支|还债|二次抵押|靠[^，。,.]{0,2}信用卡|失业金|低保|救济金|钱紧|缺钱|没钱了|存[^，。,.]{0,2}(?:\d|[一二两三四五六七八九十百千万])+\s*[块元万千]",
        statement=True),
    _zh(FINANCE, r"(?:银行|[招工建农中交]行|邮储|卡)[^。.;；\d]{0,6}\d{4}[ -]\d{4}[ -]\d{4}[ -]\d{4}(?:[ -]\d{1,3})?(?!\d)"),
    _en(FINANCE, r"(?:bank|card|visa|mastercard|amex|debit|credit)[^.;\d]{0,20}\d{4}[ -]\d{4}[ -]\d{4}[ -]\d{4}(?!\d)"),
    _zh(FINANCE, r"(?:卡号|账号|账户|银行卡|工资卡)[^，。,.\d]{0,4}\d[\d -]{5,}"
                 r"|(?<!单号)(?<!快递)(?<!订单)(?<!运单)尾号\s*(?:是|为|：|:)?\s*\d{4}"),  # not a parcel's number
    # identity documents
    _Rule(IDENTITY, re.compile(
        r"\b(?:passport|licen[cs]e|id\s+card|identity\s+card|social\s+security|national\s+insurance|ni|nhs|tax\s+id|tin|"
        r"ssn|national\s+id|residence\s+permit|visa)\b[^;]{0,45}?\b(?=[A-Z0-9 -]*\d)[A-Z0-9][A-Z0-9 -]{4,}[A-Z0-9]\b",
        re.IGNORECASE), check=_document_number),
    _en(IDENTITY, r"(?:scan|copy|photo|picture)\s+of\s+(?:my|his|her|their|the\s+customer's|[A-Z][a-z]+'s)\s+"
                  r"(?:(?:driving|driver'?s?)\s+)?(?:passport|licen[cs]e|id|id\s+card|identity\s+card|birth\s+certificate)"),
    _en(IDENTITY, r"(?:date\s+of\s+birth|dob|birthday|born)\b[^.]{0,40}?\b\d{1,2}[/.-]\d{1,2}[/.-](?:19|20)\d{2}",
        statement=True),
    _en(IDENTITY, r"date\s+of\s+birth|dob|(?:born|birthday(?:'s|\s+is)?)\s+(?:on\s+|was\s+)?(?:\d{1,2}(?:st|nd|rd|th)?\s+"
                  r"(?:of\s+)?\w+|\w+\s+\d{1,2}(?:st|nd|rd|th)?,?)\s+(?:19|20)\d{2}"),
    _Rule(IDENTITY, re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")),
    _Rule(IDENTITY, re.compile(r"(?<!\d)\d{17}[\dXx](?!\d)"), check=_cn_id_valid),
    _zh(IDENTITY,
        r"(?:身份证|护照|通行证|台胞证|回乡证|军官证|驾照|驾驶证|社保卡|社会保障|医保卡|居住证|签证)"
        r"[^。.;；]{0,12}?[A-Za-z]?\d[\dA-Za-z -]{4,}"),
    _zh(IDENTITY, r"(?:身份证|护照|驾照|驾驶证|户口本|出生证明)(?:(?!上的)[^，。,.]){0,3}(?:照片|复印件|正反面|扫描件)", "person",
        statement=True),
    _zh(IDENTITY, r"出生日期|生日是?\s*\d{4}年|\d{4}年\d{1,2}月\d{1,2}[日号][^，。,.]{0,6}出生|(?:出生|生)于\s*\d{4}年"),
    # a person's private life: a marriage ending, an affair
    _en(PRIVATE, r"(?:getting|got|going\s+through\s+(?:a\s+)?(?:\w+\s+)?|filed\s+for\s+(?:a\s+)?|asked\s+for\s+a\s+)divorce"),
    _en(PRIVATE, r"divorc(?:ed|ing)|(?:are|is|they're|they\s+are)\s+(?:separating|splitting\s+up)|(?:having|had)\s+an\s+affair|"
                 r"cheat(?:ed|ing)\s+on\s+(?:him|her|them|his|my)", "person"),
    _zh(PRIVATE, r"出轨|闹离婚|离婚了|在离婚|要离婚|分居|婚外情|劈腿|小三|"
                 r"(?:在一起|好上)了[^。]{0,12}(?:有家庭|已婚|结婚了)", "person"),
    # people's contact details
    _Rule(CONTACT, re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+\.[A-Za-z0-9.-]*[A-Za-z]")),
    _Rule(CONTACT, re.compile(
        r"(?<![\w+])\+\d[\d\s().-]{7,}\d(?!\w)"  # international, with a plus
        r"|(?<!\d)1[3-9]\d[\s-]?\d{4}[\s-]?\d{4}(?!\d)"  # Chinese mobile
        r"|(?<!\d)\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}(?!\d)"  # North American
        r"|(?<!\d)07\d{3}\s?\d{6}(?!\d)"  # UK mobile
    )),
    _en(CONTACT, r"(?:lives?|living|moved|staying)\s+(?:at|in|to)\s+(?:flat\s+\d+,?\s+)?\d{1,5}\w?\s+(?:[A-Z][a-z]+\s+){1,3}"
                 r"(?:street|st|road|rd|lane|ln|avenue|ave|drive|dr|close|way|crescent|place|terrace|court|boulevard|"
                 r"blvd|square|gardens|grove|row|mews|hill|park)"
                 r"|(?:home|house|postal|mailing|personal)\s+address|address\s+is\s+\d+"
                 r"|\b\d{1,5}\s+(?:[A-Z][a-z]+\s+){1,3}(?:street|st|road|rd|lane|avenue|ave|drive|dr|close|way|place|"
                 r"terrace|court|boulevard|blvd),?\s+(?:apartment|apt|flat|unit|suite)\s*#?\d+"),
    _zh(CONTACT, r"(?:住在|住址|家住|家庭住址|家的地址|家在|搬到|地址是|地址在)"
                 r"[^，。,.]{0,16}?(?:路|街|道|巷|弄|村|小区|号|单元|室|栋|楼)"
                 r"|(?:手机|电话|微信|邮箱)(?:号码?)?是"
                 r"|\d+\s*(?:栋|号楼|幢)\s*\d+\s*单元\s*\d{3,4}(?:室|号)?"),
]


_SENTENCE_END = re.compile(
    r"(?<=[。！？；;\n])|(?<!\b[Nn]o\.)(?<!\b[Nn]r\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bvs\.)"
    r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+"
)


def _segments(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _dropped(rule: _Rule, segment: str, match: re.Match[str]) -> bool:
    """The match only names a business thing, is a simile, or sits in a fixed phrase."""
    before, after = segment[: match.start()], segment[match.end():]
    for idiom in _IDIOMS.finditer(segment):
        if idiom.start() < match.end() and match.start() < idiom.end():
            return True
    if rule.kind == CONTACT:
        return False
    if rule.statement:
        return bool(_SIMILE_EN.search(before) or _SIMILE_ZH.search(before))
    chinese = bool(re.search(r"[\u4e00-\u9fff]", match.group()))
    if chinese:
        return bool(_BUSINESS_ZH.search(after) or _SIMILE_ZH.search(before))
    return bool(_BUSINESS_EN.search(after) or _SIMILE_EN.search(before))


def _contact_is_business(segment: str, match: re.Match[str]) -> bool:
    value = match.group()
    if "@" in value:
        return bool(_ROLE_MAILBOX.match(value))
    if re.match(r"\+?(?:1[\s-]?)?(?:\(?(?:800|888|877|866|855|844|833)\)?|0800|400)[\s-]?\d", value):
        return True  # toll-free numbers belong to businesses
    if re.search(r"\b(?:dial[\s-]?in|conference|meeting\s+id|bridge|zoom|webex|teams\s+call)\b|会议号|拨入", segment,
                 re.IGNORECASE):
        return True  # a meeting's dial-in
    if re.fullmatch(r"[\d\s().+-]+", value):
        return _business_line_before(segment, match.start())
    if _business_line_before(segment, match.start()):
        return True
    return bool(re.search(r"\b(?:office|headquarters|hq|company|shop|store|warehouse|venue|restaurant|hotel|branch)\b"
                          r"|公司|门店|办公|前台|仓库|总部|酒店|店铺", segment, re.IGNORECASE))


def _context(segment: str) -> set[str]:
    """What the segment offers the rules that need something: a person, an amount."""
    person = bool(_PERSON_EN.search(segment) or _PERSON_ZH.search(segment))
    amount = bool(_AMOUNT_EN.search(segment) or _AMOUNT_ZH.search(segment))
    return {"nothing"} | ({"person", "person_or_amount"} if person else set()) | (
        {"person_or_amount", "amount"} if amount else set())


def sensitive_kind(text: str) -> str | None:
    """The first kind of sensitive content found (health, finance, identity, contact), or None."""
    for segment in _segments(text):
        offered = _context(segment)
        lower = segment.lower()  # a few letters lowercase to two characters (İ): offsets would shift
        lowered = lower if len(lower) == len(segment) else None
        for rule in _RULES:
            if rule.needs not in offered:
                continue
            for match in rule.finditer(segment, lowered):
                if rule.check is not None and not rule.check(match):
                    continue
                if rule.kind == CONTACT and _contact_is_business(segment, match):
                    continue
                if _dropped(rule, segment, match):
                    continue
                return rule.kind
    return None
