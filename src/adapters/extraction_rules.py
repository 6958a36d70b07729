"""The rule extractor's grammar: which clauses of a message hold something worth remembering (ADR 0025).

A message is cut into sentences, a sentence into clauses (`extraction_clauses`). A sentence that asks,
supposes or reads like an assistant's answer is skipped whole. A clause *opens* a memory when it has a memory predicate
(a preference, plan, relation, constraint, standing instruction or durable fact), said of the writer,
of someone the writer names ("my wife", "老板", "Priya"), or as a bare fragment ("vegetarian, no fish");
so does any other plain statement about the writer or their people that is not an opinion, a wish or
a passing state. A short clause without a subject of its own continues the memory before it
("..., mostly Kyoto"). Every span is a slice of the message, so quotes are always exact.
"""

from __future__ import annotations

import re

from .extraction_clauses import asks, clauses, sentences, skipped
from .extraction_standing import HAN, stands_alone

# -- English ------------------------------------------------------------------------------------

_KIN = (r"(?:wife|husband|partner|spouse|boyfriend|girlfriend|fianc[ée]e?|son|daughter|kids|children|child|baby|"
        r"mom|mum|mother|dad|father|parents|brother|sister|siblings|grandfather|grandmother|grandma|grandpa|"
        r"grandparents|uncle|aunt|cousin|nephew|niece|in-laws|mother-in-law|father-in-law|family|"
        r"boss|manager|team lead|lead|supervisor|colleague|coworker|co-worker|co-founder|cofounder|assistant|"
        r"accountant|lawyer|client|landlord|landlady|doctor|dentist|ceo|cto|cfo|team|department|friend|"
        r"roommate|flatmate|neighbour|neighbor|dog|cat|pet)")
_EN_SUBJECT = re.compile(
    r"^(?i:(?:also|and|oh|btw|by the way|so|but|plus|anyway|fyi|note|honestly|frankly|personally|actually|"
    r"to be honest)[, ]+)?"
    r"(?:(?i:i|i'm|i am|i've|i'd|i'll|we|we're|we've|we'd|we'll|my|our|he|she|he's|she's|they|they're)\b"
    r"|(?:(?:Mr|Mrs|Ms|Dr)\.?\s+)?(?!(?:Everyone|Everybody|People|Nobody|Most|Some|Many|All|Kids|Children)\b)"
    r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?(?=\s+from\s+\w+|,? (?:is|are) (?:on )?(?:my|our)\b|, (?:my|our)\b"
    r"|\s+(?:prefers|likes|loves|hates|dislikes|wants|needs|can't|cannot|doesn't|never|always|only)\b"
    r"|\s+(?:on|in) (?:my|our) \w+))",
)
_EN_PREFERENCE = re.compile(
    r"\b(?:prefers?|preferred|likes?|loves?|enjoys?|hates?|dislikes?|adores?|can't stand|cannot stand|"
    r"can't bear|don't like|doesn't like|do not like|does not like|don't love|rather|'d love|would love|"
    r"fan of|into|favou?rite|terrified of|scared of|afraid of|not a \w+ person|can't live without|"
    r"wants?|needs?|never takes?|always takes?|can't get enough of|appreciate|"
    r"finds? (?:\w+ ){1,3}(?:boring|annoying|tedious|relaxing|stressful|exhausting|fun|useless|overrated))\b",
    re.IGNORECASE)
_EN_CONSTRAINT = re.compile(
    r"\b(?:allergic|allergy|intolerant|vegetarian|vegan|pescatarian|gluten-free|dairy-free|nut-free|halal|"
    r"kosher|diabetic|coeliac|celiac|(?:don't|doesn't|do not|does not|can't|cannot|never) (?:eat|drink|do|fly|"
    r"work)|avoid|only (?:takes?|answers?|eats?|drinks?|works?|uses?|reads?|accepts?|does)|sober|teetotal|"
    r"(?:makes?|keeps?) (?:me|him|her|them) (?:up|awake|sick|ill|itchy|nauseous)|"
    r"gives? (?:me|him|her|them) (?:a )?(?:headaches?|migraines?|hives))\b",
    re.IGNORECASE)
_EN_RELATION = re.compile(
    r"\b(?:is|are|was) (?:my|our) \w+|\b(?i:my|our) [\w' -]{1,30}?(?:'s name)? (?:is|are) (?:called )?[A-Z]"
    r"|^[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?, (?:my|our) |\bis on (?:my|our) team\b|\b(?i:my|our) \w+ [A-Z][a-z]+\b")
# "Ana, my accountant, ..." / "My team lead, Hiro, ...": the apposition is a relation of its own
_APPOSITION = re.compile(r"^(?:(?:(?:Mr|Mrs|Ms|Dr)\.?\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?, (?i:my|our) [\w' -]{1,25}?"
                         r"|(?i:my|our) [\w' -]{1,25}?, (?:(?:Mr|Mrs|Ms|Dr)\.?\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)(?=, )")
_EN_FACT = re.compile(
    r"\b(?:live|lives|living|based|work|works|working|grew up|(?:i'm|i am|we're|we are|is|are|comes?) from|born|"
    r"married|divorced|have|has|own|owns|i'm an?|i am an?|"
    r"drive|drives|learning|studying|usually|always|every|each|birthday|anniversary|retro|standup|stand-up|"
    r"is a|are a|is an|got a promotion|promoted|plays|play|speak|speaks|scared|afraid)\b"
    r"|^(?:my|our) [\w' -]{1,30}? (?:is|are)\b", re.IGNORECASE)
_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december|"
          r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)")
_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend)"
_EN_WHEN = re.compile(
    rf"\b(?:next (?:week|month|year|{_DAY}|{_MONTH})|this (?:summer|winter|spring|autumn|fall|week|month|year|{_DAY})|"
    rf"tomorrow|(?:in|by|until|from|before|after|early|late|mid) {_MONTH}|{_MONTH} \d{{1,2}}\b|"
    rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}|(?:on|for|by|until) (?:the )?\d{{1,2}}(?:st|nd|rd|th)|(?:on )?{_DAY}\b|"
    rf"(?:over|at|for) (?:christmas|easter|the holidays|new year|thanksgiving|diwali|eid)|the week after next|"
    rf"in \d+ (?:days|weeks|months)|"
    rf"at \d{{1,2}}(?::\d\d)?\s*(?:am|pm)?|\d{{1,2}}(?::\d\d)?\s*(?:am|pm))", re.IGNORECASE)
_EN_PLAN = re.compile(
    r"\b(?:going to|planning|plan to|plans to|will|'ll|flying|fly|heading|moving|visiting|visit|trip|travel|coming|"
    r"travelling|traveling|arrive|arrives|arriving|leaving|getting married|wedding|scheduled|appointment|"
    r"dinner|lunch|meeting|flight|conference|presenting|running|taking|starting|off|holiday|vacation|"
    r"interview|exam|renovate|renovating|surgery|party|concert|starts?|begins?|turns?|graduates?|graduation|"
    r"expecting|due|moves?|review|launch|deadline|wants? (?:the|it|this))\b", re.IGNORECASE)
# "The quarterly review is on June 30": something the writer has coming, with its date
_EN_EVENT = re.compile(rf"^(?:(?i:the|our|my) [\w' -]{{1,40}}?|(?i:{_KIN})'s? [\w' -]{{1,40}}?) "
                       r"(?:is|are|starts|begins|moves|ends|opens|closes|breaks up|finishes|arrives|leaves|happens|"
                       r"takes place)\b")
# an imperative that follows from what was just said ("..., so avoid it in recipes")
_EN_IMPERATIVE = re.compile(r"^(?:please\s+)?(?:schedule|book|keep|avoid|use|put|send|plan|skip|leave|pick|choose|"
                            r"give|stop|don't|do not|never|always|make sure|no|remind me|tell me|warn me|ask me)\b",
                            re.IGNORECASE)
_EN_INSTRUCTION = re.compile(
    r"^(?:please\s+|just\s+)?(?:always|never|don't|do not|don't ever|stop|avoid|keep|use|call me|sign|answer|reply|"
    r"respond|write|send|cc|put|address|refer to me|remember|be|say|speak)\b"
    r"|\b(?:from now on|going forward|in (?:the )?future|every time|each time|by default|whenever)\b|\balways$"
    r"|\bshould (?:go|be|come|start|begin|end|include|have|use|mention)\b|\b(?:needs? to|must|has to|have to) be\b",
    re.IGNORECASE)
_NO_THING = r"no (?!idea|problem|worries|thanks|way|clue|rush|need|doubt|kidding)\w+"
_EN_WEAK_INSTRUCTION = re.compile(
    rf"^{_NO_THING}|, not \w+|\bnot \w+ \w+$|\bin (?:english|spanish|french|german|dutch|chinese|japanese|korean|"
    r"portuguese|italian)\b", re.IGNORECASE)
_EN_FRAGMENT = re.compile(  # memories said without a subject
    r"^(?:vegetarian|vegan|pescatarian|gluten-free|dairy-free|nut-free|halal|kosher|lactose-free|"
    rf"(?:coffee|tea)(?! (?:is|are|was|has|makes))|aisle seat|window seat|{_NO_THING}|"
    r"planning|moving|heading|flying|travelling|traveling|visiting|going|dentist|doctor|dinner|lunch|"
    r"breakfast|meeting|flight|trip|emails?|markdown|meeting notes)\b(?!.*\b(?:is|are|was|were|has|have)\b)",
    re.IGNORECASE)
_EN_PASSING = re.compile(
    r"\b(?:today|tonight|right now|this morning|just had|just got back|just woke|at the moment|in a rush|in a meeting|"
    r"was late|long day|tired|hungry|sleepy|busy now|went well|overwhelmed|stressed|swamped|knackered|shattered|"
    r"never mind|nevermind)\b"
    r"|^(?:(?:ok|okay|alright|right|righto|yeah|fine)[, ]+)?(?:(?:tomorrow|later|tonight) )?"
    r"(?:i'll|i’ll|we'll|we’ll|i will|we will) (?:\w+ ){0,5}?(?:tomorrow|tonight|later|in a bit|after lunch)\b"
    r"|^(?:(?:ok|okay|alright|right|righto|yeah|fine)[, ]+)?(?:tomorrow|later|tonight) "
    r"(?:i'll|i’ll|we'll|we’ll|i will|we will)\b",
    re.IGNORECASE)  # a to-do, not a memory
_EN_ONE_OFF = re.compile(
    r"^(?:please\s+)?(?:write|translate|summari[sz]e|fix|give me|tell me|book|find|show|make|draft|check|"
    r"send me|remind me|help me|explain|list|compare|generate|create|let's|let me)\b", re.IGNORECASE)


# Statements about the writer or their people that no predicate above names ("I can't handle horror movies")
_EN_PERSONAL = re.compile(rf"^(?i:i|i'm|i am|i've|we|we're|we've|my|our|my {_KIN}|he|she|he's|she's)\b")
_EN_NOT_DURABLE = re.compile(
    r"^(?i:i'll|we'll|i'd|we'd)\b"
    r"|^(?i:i|we) (?:think|guess|hope|feel like|wonder|bet|mean|know|believe|suppose|agree|see|understand|"
    r"just|was|were|did|had|forgot|need to|have to|should|must|might|may|could|'ll|will|'d|would)\b"
    r"|^(?i:i'm|i am|we're|we are) (?:sure|not sure|afraid|sorry|glad|happy|done|back|here|on it|stuck|late|"
    r"going to|about to|so|really sorry|just|still|fine|ok|okay|good|great|home|ready|lost|confused|excited|"
    r"nervous|worried|bored|busy|cold|hot|in|at|out|off|up|down|almost|nearly|free)\b"
    r"|^(?i:i've|we've) (?:just|been (?:thinking|wondering))\b"
    r"|^(?i:i've|we've) had\b|^(?i:i'm|we're) (?!trying|learning|studying|training|working)\w+ing\b"
    r"|\b(?i:again|already|yet|right now|at the moment|this week|for now|on my way|lol|haha)\b", re.IGNORECASE)
_EN_INTENT = re.compile(r"\b(?:going to|planning|plan to|'ll be|will be|moving to|flying to)\b", re.IGNORECASE)
_CONNECTOR = re.compile(r"^(?i:and|but|so|also|plus|oh|btw|honestly|frankly|personally|actually)\b[, ]*")
_LEADING_WHEN = re.compile(rf"^(?:{_EN_WHEN.pattern})[, ]+", re.IGNORECASE)


def _english(clause: str, *, first: bool) -> tuple[bool, bool]:
    """(opens a memory, has a subject of its own) for one English clause."""
    c = _LEADING_WHEN.sub("", _CONNECTOR.sub("", clause.strip()))
    subject = bool(_EN_SUBJECT.match(c))
    if _EN_PASSING.search(c):
        return False, subject
    persistent = bool(re.search(r"\b(?:always|never|every|usually|from now on)\b", c, re.IGNORECASE))
    if _EN_ONE_OFF.match(c) and not persistent:
        return False, True  # a one-off request ends any memory before it
    if _EN_INSTRUCTION.search(c) and not re.search(r"\bkeep (?:that|this|it) in mind\b", c, re.IGNORECASE):
        return True, True
    if subject and (_EN_PREFERENCE.search(c) or _EN_CONSTRAINT.search(c) or _EN_RELATION.search(c)
                    or _EN_FACT.search(c) or _EN_WHEN.search(clause) or _EN_INTENT.search(c)):
        return True, True
    if _EN_RELATION.search(c) or (_EN_WHEN.search(c) and (_EN_PLAN.search(c) or _EN_EVENT.match(c)) and not subject):
        return True, subject
    if _EN_WEAK_INSTRUCTION.search(c):
        return True, subject
    if re.search(r"\b(?:makes?|keeps?|gives?) (?:me|him|her|them)\b", c, re.IGNORECASE) and _EN_CONSTRAINT.search(c):
        return True, True  # "..., caffeine keeps me up": a clause of its own, with its own subject
    if _EN_FRAGMENT.match(c) and (first or _EN_CONSTRAINT.search(c)):
        return True, False
    if not subject and _EN_CONSTRAINT.search(c):
        return True, False
    if (subject or _EN_PERSONAL.match(c)) and not _EN_NOT_DURABLE.search(c) \
            and (len(c.split()) >= 3 or re.match(r"^(?i:i'm|we're|he's|she's) [\w-]+$", c)):
        return True, True  # any other plain statement about the writer or their people
    return False, subject


# -- Chinese ------------------------------------------------------------------------------------

_ZH_PERSON = (r"(?:老婆|老公|太太|丈夫|妻子|爱人|对象|男朋友|女朋友|儿子|女儿|孩子|妈妈|妈|爸爸|爸|父母|父亲|母亲|"
              r"哥哥|哥|姐姐|姐|弟弟|弟|妹妹|妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|岳父|岳母|公公|婆婆|舅舅|姑姑|阿姨|"
              r"叔叔|表哥|表姐|表弟|表妹|侄子|侄女|外甥|同事|朋友|同学|室友|邻居|领导|老板|经理|主管|总监|助理|"
              r"导师|老师|医生|律师|房东|客户|合伙人|投资人|设计师|法务|团队|组|部门|公司|家)")
_ZH_SUBJECT = re.compile(
    rf"^(?:另外|还有|对了|而且|顺便说一下)?[，,]?(?:我|我们|咱们|他|她|他们|{_ZH_PERSON}|[\u4e00-\u9fff]{{1,2}}总|"
    rf"小[\u4e00-\u9fff]|老[\u4e00-\u9fff](?!师)|阿[\u4e00-\u9fff]|[\u4e00-\u9fff]{{2,3}}(?=是我))")
_ZH_PREFERENCE = re.compile(r"喜欢|爱(?!人)|偏好|讨厌|不喜欢|不爱|受不了|怕|习惯|偏爱|最爱|希望|更愿意|迷上|爱上|很烦|"
                            r"不坐|只喝|只吃|只用")
_ZH_STRONG_TASTE = re.compile(r"喜欢|偏好|讨厌|迷上|爱上|受不了|过敏|吃素|素食|不吃|不喝|只吃|只喝|不能吃|不能喝|吃不了|忌口")
_ZH_CONSTRAINT = re.compile(r"过敏|吃素|素食|不吃|不喝|不能吃|不能喝|吃不了|喝不了|忌口|不能(?!不)|不在|没空(?!，)|"
                            r"戒了|戒烟|戒酒|血压|糖尿病|从来不|从不|不太能|不耐受|只(?:回|接|看|坐|住|吃|喝|用)|只能|"
                            r"不方便|让我(?:睡不着|过敏|难受|头疼|头痛|不舒服|拉肚子)|得是|必须是|必须要")
_ZH_RELATION = re.compile(r"是我(?:们)?的|我(?:们)?(?:[\u4e00-\u9fff]{0,4}的)?[\u4e00-\u9fff]{1,4}(?:是|叫)[\u4e00-\u9fff]|"
                          r"[\u4e00-\u9fff]总是我们的")
_ZH_FACT = re.compile(r"住在|在[\u4e00-\u9fff]{1,8}(?:工作|上班|上学|上大学|读大学|读研|读博|念书|读书|做|开)"
                      r"|是[\u4e00-\u9fff]{1,4}人$|左撇子|右撇子|"
                      r"养了|每天|每周|每年|每个月|每晚|正在学|在学|在读|生日|纪念日|用[\u4e00-\u9fff]{1,4}，?不用|"
                      r"怀孕|岁了|上[一二三四五六七八九]年级|是[\u4e00-\u9fff]{1,6}(?:老师|医生|工程师|经理|律师|护士)|"
                      r"的车是|名叫|叫[\u4e00-\u9fff]{1,4}$|值夜班|耳朵|眼睛|长大|会说|一般|^我(?:们)?(?:家)?有|"
                      r"^我是(?!说)[\u4e00-\u9fff]{1,6}$")
_ZH_WHEN = re.compile(r"清明|五一|十一|圣诞|元宵|七夕|早上|中午|"
                      r"下个?月|下下?周|下个?星期|下个?礼拜|明天|后天|明年|今年|年底|年初|月底|月初|这个?周末|周末|"
                      r"春节|国庆|元旦|中秋|端午|暑假|寒假|[一二三四五六七八九十\d]+月(?:份|底|初|中)?|下个?季度|"
                      r"[一二三四五六七八九十\d]+号|周[一二三四五六日天]|星期[一二三四五六日天]|[上下]午|晚上")
_ZH_PLAN = re.compile(r"打算|计划|准备|预计|要去|要搬|要在|要带|要把|要考|去|回|飞|出差|搬|结婚|休|考|旅游|旅行|聚餐|约了|"
                      r"开会|会议|参观|见|来|出生|上学|上小学|上幼儿园|装修|复盘|大寿|生日|毕业|面试|考试|体检|手术|出发|"
                      r"参加|婚礼|聚会|评审|答辩|上线|发布|交|离职|入职|转岗|退休|到期|开学|放假")
_ZH_INSTRUCTION = re.compile(r"^(?:以后|今后|从现在起|从今以后|以后都|请(?!问|假|客|教)|记住|所有|统一|汇报|邮件|行程|文件)|"
                             r"^[\u4e00-\u9fff]{0,12}?(?:(?<![特区告分级类个差鉴识性])别|不要|不用)|回(?:复|答)(?:请|要|用|时)|"
                             r"叫我|称呼我|以后都|都这样|每次|一律|统一|尽量|(?:多|少)(?:放|安排|用)|先说|直接找|都找|"
                             r"安排在|放在|每[\u4e00-\u9fff]{0,8}都要|都(?:给我|帮我)|的时候.{0,12}(?:就行|就好|请|要|用|叫)")
_ZH_NOT_DURABLE = re.compile(r"^我(?:们)?(?:觉得|想|猜|估计|感觉|希望|看(?!不)|知道|明白|认为|以为|刚|正在忙|马上|这就|先|"
                              r"会尽快|得|该|去(?!年)|来)|"
                              r"又|再也|了吗|吧$|啊$|呀$|哈+$|错了|不知道|够了|[要快会]迟到|已经[\u4e00-\u9fff]{0,3}过了")
# the writer (after at most a short topic: "隔音差的酒店我睡不好"), not as an object ("帮我", "跟我们")
_ZH_PERSONAL = re.compile(rf"^(?:(?!那是|这是|那就|这就)[\u4e00-\u9fff]{{0,8}}?(?<![给帮让叫告诉提醒跟和与对陪把被替])我"
                          rf"|我{_ZH_PERSON}|他|她)")
_ZH_GENERIC = re.compile(r"^(?:大家|人们|很多人|大多数人|有人|谁都|人人|一般人)")
_ZH_REQUEST = re.compile(r"^(?:请)?(?:帮我|给我|帮忙|麻烦)(?![\u4e00-\u9fff]{0,10}的时候)")
_ZH_PASSING = re.compile(r"今晚|晚点|回头|待会|一会儿|今天|刚才|刚|现在|这会儿|最近|累|饿|困|堵|在开车|没空")


def _chinese(clause: str, *, first: bool) -> tuple[bool, bool]:
    c = clause.strip()
    subject = bool(_ZH_SUBJECT.match(c))
    if _ZH_REQUEST.match(c) or _ZH_GENERIC.match(c):
        return False, True  # a one-off request or a saying about everyone: it ends any memory before it
    if re.match(r"^(?:不用|而不是|不是|也不要|也不)", c):
        return True, False  # "..., 不用钉钉": the other half of what was just said
    if _ZH_INSTRUCTION.search(c):
        return True, True
    lasting = bool(re.search(r"每|一直|总是|从来|以后|都|迷上|爱上", c))
    if _ZH_PASSING.search(c) and not lasting and not _ZH_WHEN.search(c.replace("今天", "")):
        return False, subject
    personal = subject or bool(re.search(r"(?<![给帮让叫告诉提醒])我", c))
    if personal and (_ZH_PREFERENCE.search(c) or _ZH_CONSTRAINT.search(c) or _ZH_RELATION.search(c)
                     or _ZH_FACT.search(c) or _ZH_WHEN.search(c)):
        return True, True
    if _ZH_RELATION.search(c):
        return True, subject
    if re.search(r"[\u4e00-\u9fff]让我", c) and _ZH_CONSTRAINT.search(c):
        return True, True  # "..., 咖啡因让我睡不着"
    if _ZH_WHEN.search(c) and re.search(r"不行|不方便|没空|不在", c):
        return True, subject  # "早上九点前不行"
    if _ZH_WHEN.search(c) and _ZH_PLAN.search(c):
        return True, subject
    if not subject and (_ZH_CONSTRAINT.search(c) or _ZH_STRONG_TASTE.search(c)
                        or (_ZH_PREFERENCE.search(c) and not first)) and not _ZH_GENERIC.match(c):
        return True, False
    if first and re.match(r"^(?:喝|吃|点)[\u4e00-\u9fff]*(?:不加|加|要|不要)", c):
        return True, False
    own = _ZH_PERSONAL.match(c)
    if own and not _ZH_NOT_DURABLE.search(c[own.end() - 1:]) and len(c) >= 4:
        return True, True  # any other plain statement about the writer or their people
    return False, subject


# -- the spans ------------------------------------------------------------------------------------

# a request, a question or a greeting: no topic for the clause after it
_ZH_ASIDE = re.compile(r"^(?:请)?(?:帮我|给我|帮忙|麻烦)|请教|问一下|问问|想问|^(?:hi|hello|哈喽|你好|嗨)|一下$"
                       r"|你[\u4e00-\u9fff]{0,3}帮我"
                       r"|吗$|呢$|[?？]$")
_QUESTION_TAIL = re.compile(r"^(?i:any|can you|could you|would you|will you|what|how|which|where|who|when|is there|are there|"
                            r"do you|should i)\b|^(?:帮我|请帮我|你能|能不能|可以|有没有|请问)")
_QUALIFIER = re.compile(r"^(?i:even|unless|except|especially)\b")
_CONTRAST = re.compile(r"^(?i:not|rather than|instead of)\b|^(?:不用|而不是|不是|别|不要)")


def _statements(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The clauses of a sentence to read: all of a statement; of a question, only statements said before it
    in clauses of their own ("My nephew loves dinosaurs, any gift ideas?")."""
    parts = clauses(text, start, end)
    if not skipped(text[start:end]):
        return parts
    if len(parts) < 2 or not _QUESTION_TAIL.match(text[parts[-1][0]:parts[-1][1]]):
        return []
    head = parts[:-1]
    return [] if skipped(text[head[0][0]:head[-1][1]]) else head


# A span that leans on words said before it: a pronoun with its referent elsewhere ("he started Monday",
# "please never schedule them", 他下周三到), or a clause that only comments ("I always forget"). Alone it
# is a fragment the person cannot judge; it is read together with what it leans on (ADR 0041).
_EN_LEANS = re.compile(
    r"^(?:(?:and|but|so|also|oh|btw|plus|then)[, ]+)?(?:(?:he|she|it|they|this|that|these|those)(?:'s|'re|'ll|'d)?\b"
    r"(?! (?:is|are|was) (?:a|an|the|my|our)\b)|his |her |their |its "
    r"|(?:please )?(?:(?:never|don't|do not|always|just) )?\w+ (?:them|it|him|her)\b"
    r"|i (?:always|never|keep) (?:forget|forgetting|mix (?:it|them) up)\b|don't tell anyone|do not tell anyone)",
    re.IGNORECASE)
# "..., so I'll be doing most nights": a consequence, a contrast or a reason says what it follows from, when
# that was a memory of the same sentence
_FOLLOWS = re.compile(r"^(?:so|but|because|since|which)\b(?!\s+(?:please\s+)?(?:don't|do not|never|always|no|"
                      r"avoid|keep|book|use|schedule|skip|make sure)\b)|^(?:所以|但是|但|不过|不然|否则|因为)"
                      r"|^我们(?:俩|两个)?(?=[\u4e00-\u9fff])(?!.*[，,])",  # "老公叫周航，我们在一起六年了"
                      re.IGNORECASE)
_ZH_LEANS = re.compile(r"^(?:而且|但是|不过|所以|然后|还有)?(?:他|她|它|他们|她们|这个|那个|这|那)"
                       r"(?![些里边样么天周月年次回]|个(?:周|星期|月|礼拜))")


def leans(piece: str) -> bool:
    return bool((_ZH_LEANS if HAN.search(piece) else _EN_LEANS).match(piece.strip())) or not stands_alone(piece)


def with_referents(text: str, spans: list[tuple[int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Each span as (quote, what its memory says): the same span, except for one that leans on what was
    said before it, whose memory says the stretch from the span before it (or, when none was proposed,
    from the start of its own sentence or the one before) to its end. The quote stays the span itself,
    an exact part of the message; the memory's text stands on its own. One at the very start of a
    message has nothing before it to lean on: its memory says the rest of its sentence, where the
    referent may follow ("He's terrified of flying, my dad")."""
    bounds = list(sentences(text))
    # a question is no referent: what leans on it was said about the question ("...? she keeps offering")
    statements = [s for s, e in bounds if not asks(text[s:e])]
    out: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for a, b in spans:
        said = (a, b)
        lean = leans(text[a:b])
        own = max((s for s, _ in bounds if s <= a), default=a)  # the start of its own sentence
        if out and not lean and _FOLLOWS.match(text[a:b]):
            if out[-1][0][0] >= own and not _ZH_ASIDE.search(text[out[-1][1][0]:out[-1][1][1]]):
                said = (out[-1][0][0], b)
        elif lean:
            earlier = [s for s in statements if s < own]
            if out and out[-1][0][0] >= (earlier[-1] if earlier else own):
                said = (out[-1][0][0], b)  # the memory proposed just before it, in this sentence or the last
            elif own < a:
                said = (own, b)  # its referent is earlier in the same sentence
            elif earlier:
                said = (earlier[-1], b)  # ... or in the sentence before
            else:  # nothing before it: its referent may come after it ("He's terrified of flying, my dad")
                said = (a, max(b, next((e for s, e in bounds if s <= a < e), b)))
        out.append(((a, b), said))
    return out


def memory_spans(text: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(quote, text) spans of each memory worth proposing from the message (see `with_referents`)."""
    return with_referents(text, _spans(text))


def _spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    asked = False  # the sentence before was a question
    quotes, counted = 0, 0  # the double quotes before the sentence: odd inside a quotation
    for s_start, s_end in sentences(text):
        parts = _statements(text, s_start, s_end)
        after_question, asked = asked, asks(text[s_start:s_end])
        quotes, counted = quotes + text.count('"', counted, s_start), s_start
        if not parts or quotes % 2:
            continue  # nothing to remember, or words the person quotes
        if after_question and not HAN.search(text[s_start:s_end]) \
                and not _english(text[parts[0][0]:parts[0][1]], first=True)[1]:
            continue  # "...recipe? no chilli": what the question asks for, not a memory (Chinese drops subjects)
        whole = parts[-1][1] == clauses(text, s_start, s_end)[-1][1]  # not a statement before a question
        apposition = _APPOSITION.match(text, s_start, s_end)
        if apposition:  # "Ana, my accountant, wants ...": one clause, and the apposition a memory of its own
            spans.append((s_start, apposition.end()))
            inside = [p for p in parts if p[0] < apposition.end()]
            rest = parts[len(inside):]
            parts = [(s_start, rest[0][1] if rest else inside[-1][1])] + rest[1:]
        group: list[int] | None = None
        for i, (a, b) in enumerate(parts):
            piece = text[a:b]
            han = bool(HAN.search(piece))
            opens, own_subject = (_chinese if han else _english)(piece, first=i == 0)
            short = len(piece) <= 8 if han else len(piece.split()) <= 4
            tiny = len(piece) <= 4 if han else len(piece.split()) <= 2
            if group is not None and (tiny or _QUALIFIER.match(piece)):
                group[1] = b  # "..., never milk", "..., even if it's bad news"
                continue
            consequence = bool(re.match(r"^(?:so|but|because|since|因为|所以|但是|不过)\b", piece, re.IGNORECASE))
            if consequence and group is not None and _EN_IMPERATIVE.match(_CONNECTOR.sub("", piece)) \
                    and not re.search(r"\bkeep (?:that|this|it) in mind\b", piece, re.IGNORECASE):
                opens, own_subject = True, True  # "I'm allergic to cats, so no pet-friendly rentals"
            if group is None and i > 0 and _CONTRAST.match(piece) \
                    and not re.search(r"是|\b(?:is|are)\b", text[parts[i - 1][0]:parts[i - 1][1]]):
                group = [parts[i - 1][0], b]  # "Weekly reports go to Hannah, not to me"
            elif opens and not own_subject and group is None and i > 0 and not han \
                    and _EN_ONE_OFF.match(_CONNECTOR.sub("", text[parts[i - 1][0]:parts[i - 1][1]])):
                continue  # "Give me the answers in English, questions in Japanese": the rest of a request
            elif opens and not own_subject and group is None and i > 0 and han \
                    and not _ZH_ASIDE.search(text[parts[i - 1][0]:parts[i - 1][1]]):
                group = [parts[i - 1][0], b]  # "最近在搞一个迁移项目，月底上线": a Chinese clause without a subject
                # says its topic in the clauses before it
            elif opens and (own_subject or group is None or consequence):
                if group is not None:
                    spans.append((group[0], group[1]))
                group = [a, b]
            elif group is not None and not own_subject and (opens or short):
                group[1] = b
            else:
                if group is not None:
                    spans.append((group[0], group[1]))
                group = None
        if group is not None:
            end = s_end if whole and group[1] == parts[-1][1] else group[1]
            spans.append((group[0], end))  # the sentence's own full stop belongs to its last memory
    return spans
