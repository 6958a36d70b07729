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
The words themselves are in `sensitive_terms`; the long alternations scan behind `regex_prefilter`.
The labelled set in bench/data/sensitive/ measures the rules (bench/sensitive.py); see
docs/adr/0024-sensitive-rules.md for the figures and the known limits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date

from .regex_prefilter import prefiltered
from .sensitive_terms import (
    ALLERGENS,
    ALLERGENS_ZH,
    CONDITIONS_EN,
    CONDITIONS_ZH,
    ENGAGED_EN,
    IDIOMS,
    MEDICINES_EN,
    PERSONAL_HEALTH_EN,
    PERSONAL_HEALTH_ZH,
)

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


def _en(kind: str, body: str, needs: str = "nothing", statement: bool = False) -> _Rule:
    lowercase = not any(c.isupper() for c in re.sub(r"\\[A-Za-z]", "", body))  # escapes such as \S aside
    return _Rule(kind, re.compile(rf"\b(?:{body})\b", re.IGNORECASE), needs, statement=statement,
                 folded=prefiltered(re.compile(rf"\b(?:{body})\b")) if lowercase else None)


def _zh(kind: str, body: str, needs: str = "nothing", statement: bool = False) -> _Rule:
    return _Rule(kind, prefiltered(re.compile(body)), needs, statement=statement)


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

_RULES: list[_Rule] = [
    # health
    _Rule(HEALTH, re.compile(r"\b(?:has|have|had|with|diagnosed\s+with)\s+MS\b")),
    _en(HEALTH, CONDITIONS_EN),
    _en(HEALTH, PERSONAL_HEALTH_EN, "person"),
    _en(HEALTH, MEDICINES_EN, "person"),
    _en(HEALTH, r"intensive\s+care|icu|a&e|emergency\s+room|rehab", "person"),  # not "A&E sounds intense"
    _en(HEALTH, rf"(?:on|taking|takes|take|took|started|starting|stopped|prescribed|given)\s+(?:\w+\s+)?(?:{MEDICINES_EN})"),
    _en(HEALTH, ENGAGED_EN, "person"),
    _en(HEALTH, rf"allergic\s+to\s+(?:\w+\s+)?(?:{ALLERGENS})"),
    _zh(HEALTH, CONDITIONS_ZH),
    _zh(HEALTH, PERSONAL_HEALTH_ZH, "person"),
    _zh(HEALTH, r"(?:要|得|刚|去|准备|约了|排了)(?:做|动)[^，。,.]{0,12}手术|(?:医生|大夫)[^。]{0,10}开了|"
                r"每天(?:吃|服)[一两半\d]+(?:片|粒|颗)", statement=True),
    _zh(HEALTH, rf"对(?:{ALLERGENS_ZH})(?:[^，。,.]{{0,2}})过敏"),
    _zh(HEALTH, rf"(?:{ALLERGENS_ZH})过敏", "person"),
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
    for idiom in IDIOMS.finditer(segment):
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
