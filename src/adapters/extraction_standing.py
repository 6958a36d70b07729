"""Whether a candidate's text stands on its own (ADR 0041, issue: whole statements).

A text that leans on words outside it ("she's bringing her son", "I'll send that tomorrow", 他下周三到,
"we'll go Sunday instead") cannot be judged by the person who reviews it, nor used by a bot that
recalls it. Within one message the extractor already reads a leaning clause together with the words it
leans on (`extraction_rules.with_referents`); what still leans after that leans on an earlier message,
and is not proposed. A model's proposal passes the same test.
"""

from __future__ import annotations

import re

HAN = re.compile(r"[\u4e00-\u9fff]")  # a Chinese character (the extractors read it too)

# a person, place or thing named before a pronoun can refer to it
_CAPITALISED = r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'’-]+"  # a capitalised word not opening a sentence
_OBJECT = (r"\b(?i:hate|hates|love|loves|like|likes|prefer|prefers|have|has|own|owns|bought|use|uses|need|needs|"
           r"allergic to|can't stand|cannot stand)\s+(?!(?i:to|been|had|got|heard|seen|done|just|never|always|it|them|"
           r"him|her|that|this|some|one)\b)[\w'’-]+"  # what someone has, likes, needs ...
           r"|\b(?i:two|three|four|five|six|\d+)\s+[a-z][\w'’-]+")  # ... or counts ("two cats")
_EN_NAMED = re.compile(_CAPITALISED + r"|\b(?i:my|our|his|her|their|the|a|an|this|that)\s+(?:[\w'’-]+\s+){0,3}?[\w'’-]+"
                       r"|" + _OBJECT)
# "he", "she", "him", "her" stand for a person: a name, or a noun for one ("my boss", "the photographer")
_EN_PERSON_NAMED = re.compile(
    r"\b(?!(?:I|I'm|I've|I'll|I'd|He|She|It|They|We|This|That|Then|There|Please|Also|And|But|So|Oh|Ok|OK|Okay|"
    r"Actually|Wait|The|My|Our|A|An|Mr|Mrs|Ms|Dr|Hi|Hey|Thanks|Sorry|Yes|No)\b)[A-Z][\w'’-]+"
    r"|\b(?i:wife|husband|partner|spouse|boyfriend|girlfriend|fianc[ée]e?|son|daughter|kids?|child(?:ren)?|baby|"
    r"mom|mum|mam|mother|dad|father|parents?|brother|sister|siblings?|grand\w+|uncle|aunt|auntie|cousin|nephew|"
    r"niece|in-laws?|\w+-in-law|family|boss|manager|lead|supervisor|colleague|co-?worker|co-?founder|assistant|"
    r"client|landlord|landlady|doctor|dentist|friend|roommate|flatmate|neighbou?r|dog|cat|puppy|kitten|pet|guy|man|"
    r"woman|lady|girl|boy|person|teacher|coach|tutor|nurse|vet|boss|owner|people|folks|team|everyone)s?\b"
    r"|\b(?i:my|our|his|her|their|the|a|an|this|that)\s+(?:[\w'’-]+\s+){0,2}?[\w'’-]+(?:er|or|ist|ian|ant|ent)s?\b")
# "it" and "its" stand for a thing, which a name opening the sentence seldom is ("Vikram wants to finance it")
_EN_THING_NAMED = re.compile(_CAPITALISED + r"|\b(?i:my|our|his|her|their|the|a|an|this|that|some|any)\s+"
                             r"(?:[\w'’-]+\s+){0,3}?[\w'’-]+|" + _OBJECT)
_EN_OPENING_NAME = re.compile(r"(?:^|[.!?]\s+)(?!(?:I|I'm|I've|I'll|I'd|He|She|It|They|We|This|That|Then|"
                              r"There|Please|Also|And|But|So|Oh|Actually|Wait)\b)[A-Z][a-z][\w'’-]*")
_EN_PRONOUN = re.compile(r"\b(?:he|she|him|his|her|hers|they|them|their|its|"
                         r"(?<!keep )(?<!make )(?<!say )(?<!put )(?<!take )(?<!if )it(?!(?:['’]s| is)? (?:(?:been|getting) )?"
                         r"(?:rains?|raining|snows?|snowing|cold|hot|late|early|dark|sunny)\b))\b", re.IGNORECASE)
_EN_OPENING_THING = re.compile(_EN_OPENING_NAME.pattern + r"(?!\s+(?:wants|says|said|thinks|thought|asked|told|needs|"
                               r"likes|loves|hates|is|was|will|would|can|can't|won't|and|or)\b)(?!['’]s)")
_EN_NAMED_AFTER = re.compile(r"(?<!\bher )(?<!\bhis )(?<!\btheir )\b(?i:my|our)\s+\w+|,\s+[A-Z][a-z]+\b")
_EN_DEMONSTRATIVE = re.compile(  # "that"/"this" standing for something said before, not pointing at a noun
    r"\b(?:on|about|against|with|for|of|doing|do|did|send|sent|said|hate|love|like|forget|mention|try|"
    r"change|fix|handle|need|want|remember|know|like)\s+(?:that|this|those|these)\b"
    r"(?=\s*(?:$|[,.;!?)]|\s(?:tomorrow|today|tonight|now|later|then|again|anymore|stuff|advice|idea|one|thing|"
    r"part|bit|before|after|first|too|either|please|on|in|at|by)\b))"
    r"|^(?:that|this)(?:['’]s| is| was| would| will)\b", re.IGNORECASE)
_EN_ELSEWHERE = re.compile(  # a correction or a place that names nothing of its own
    r"^(?:actually|wait|correction|scratch|sorry|no|nope|ok|okay|oh|yeah|right)\b[,:]?\s*(?:it'?s|its|not|make it|"
    r"scratch|we'll|i'll|change|the)\b"
    r"|^(?:correction|no wait|wait no|sorry,? i meant|i meant)\b|\bnot this \w+,? (?:the )?next one\b"
    r"|^i (?:made an? (?:error|mistake)|must have (?:misheard|misread|mixed)|misheard|got (?:it|that|the \w+) wrong)\b"
    r"|\binstead\b|\b(?:not|rather than) (?:the )?\d{1,2}(?:st|nd|rd|th)?\b"
    r"|\bthe (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|day|week) (?:after|before)\b(?!\s+(?:\w+\s+){0,3}\w)"
    r"|\b(?:here|there)\b(?!\s*(?:is|are|was|were|'s|’s|will|might|may)\b)"
    r"|\b(?:like|as) you (?:said|suggested)\b|\b(?:some|one) up\b", re.IGNORECASE)  # "I'll pick some up"
# "those arvos", "that same day", "... then": a time named before, unless this text names it
_EN_THAT_TIME = re.compile(r"\b(?:those|that|the same) (?:same )?(?:days?|mornings?|afternoons?|evenings?|nights?|"
                           r"weekends?|arvos?|dates?|times?|weeks?)\b|\bthen[.!]*$", re.IGNORECASE)
_EN_A_TIME = re.compile(r"\b(?:mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|weekends?|"
                        r"mornings?|evenings?|tomorrow|tonight|january|february|march|april|may|june|july|august|"
                        r"september|october|november|december|\d{1,2}(?:st|nd|rd|th)|\d{1,2}(?::\d\d)?\s*(?:am|pm))\b",
                        re.IGNORECASE)

_ZH_PRONOUN = re.compile(r"[他她它](?!们?(?:自己)?说(?:过)?的)|这(?:个|些|类|件|事)(?!月|周|星期|礼拜|周末)|"
                         r"那(?:个|些|类|件|事)(?!月|周|星期|礼拜)|^(?:这边|这里|那边|那里|这样|那样)")
_ZH_NAMED = re.compile(r"叫[\u4e00-\u9fff]|[王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗郑梁谢宋唐许韩冯邓"
                       r"曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁沈姚卢姜崔钟谭陆汪范金廖贾夏韦方邹孟熊秦邱江尹薛段雷侯龙史陶黎贺顾毛郝龚邵钱严覃戴莫孔汤]"
                       r"[\u4e00-\u9fff]{1,2}(?=[是说喜爱不在要想叫会的，,])|[老小阿][\u4e00-\u9fff]"
                       r"|[\u4e00-\u9fff]{1,2}(?:总|姐|哥|老师|医生|设计师|经理)"
                       r"|(?:老婆|老公|太太|丈夫|妻子|爱人|对象|男朋友|女朋友|儿子|女儿|孩子|妈妈|妈|爸爸|爸|父亲|母亲|哥哥|"
                       r"姐姐|弟弟|妹妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|岳父|岳母|公公|婆婆|舅舅|姑姑|阿姨|叔叔|同事|朋友|"
                       r"同学|室友|邻居|领导|老板|经理|主管|总监|助理|导师|老师|医生|律师|房东|客户|猫|狗)")  # people, not groups
_ZH_ELSEWHERE = re.compile(r"^(?:那|也|反而|就是|不是|改成|改到|换成)|(?:^|[，,])(?:改成|改到|换成)|^不是[^，,。]{1,8}[，,]"
                           r"|更正|纠正|说错了|不是[^，,。]{1,10}[，,]是|[这那]么(?:干|做|办|弄|说)|[这那]种(?![\u4e00-\u9fff])"
                           r"|(?:商量|考虑|想|看|问|试|聊)一下(?:吧)?$|试试(?:看)?$"
                           # a bare "是 + a time" answers an earlier question or corrects an earlier date
                           r"|(?:^|[，,])(?:哦|噢)?是(?:明年|今年|下个?月|下周|下个?星期|[\d一二三四五六七八九十]+[月号日]|周[一二三四五六日天]|星期)")
# "那几天", "那段时间": a time named before, unless this text names one
_ZH_THAT_TIME = re.compile(r"那(?:几|两|三)天|^那天|那段时间|那阵子|那时候|^那周|那个周末")
_ZH_A_TIME = re.compile(r"[\d一二三四五六七八九十]+[月号日]|周[一二三四五六日天末]|星期|礼拜|明天|后天|下周|下个?月|明年|今年"
                        r"|春节|国庆")


def stands_alone(text: str) -> bool:
    """True when nothing in the text leans on words said outside it."""
    t = text.strip()
    if HAN.search(t):
        if _ZH_ELSEWHERE.search(t):
            return False
        when = _ZH_THAT_TIME.search(t)
        if when and not _ZH_A_TIME.search(t, 0, when.start()):
            return False
        m = _ZH_PRONOUN.search(t)
        return m is None or bool(_ZH_NAMED.search(t, 0, m.start()))
    if _EN_ELSEWHERE.search(t) or _EN_DEMONSTRATIVE.search(t):
        return False
    when = _EN_THAT_TIME.search(t)
    if when and not _EN_A_TIME.search(t, 0, when.start()):
        return False
    m = _EN_PRONOUN.search(t)
    if m is None:
        return True
    before = t[:m.start()]
    if not before.strip():  # a pronoun first may name its referent after it ("He's terrified of flying, my dad")
        return bool(_EN_NAMED_AFTER.search(t, m.end()))
    word = m.group().lower()
    if word in ("he", "she", "him", "his", "her", "hers"):
        return bool(_EN_PERSON_NAMED.search(before))
    if word in ("it", "its"):  # a thing opening the sentence does ("Shellfish makes me sick, so avoid it")
        return bool(_EN_THING_NAMED.search(before) or _EN_OPENING_THING.search(before))
    return bool(_EN_NAMED.search(before) or _EN_OPENING_NAME.search(before))


# what someone else says, or a rumour passed on: not the person's own memory, whoever it names
# whose word about the person is theirs to keep, not hearsay
_CARERS = r"(?:doctor|gp|physio|physiotherapist|dentist|therapist|nurse|surgeon|vet|cardiologist|specialist)\b"
_EN_HEARSAY = re.compile(
    r"^(?:(?:and|also|oh|btw|honestly|so|but|random,? but)[, ]+)*(?:apparently|supposedly|rumou?r (?:has it|is)|"
    r"i(?:'ve)? (?:also )?heard|heard|word is|"
    r"(?:(?:my|our|his|her) (?!" + _CARERS + r")[\w' -]{1,30}?|[A-Z][a-z]+(?: from [\w ]{1,20}?)?) "
    r"(?:says|said|reckons|claims|told me|thinks)\b)"
    # "the club secretary reckons", "people at the market were saying", "a friend from my class said",
    # "there's a rumour ...": what others say, however they are named (not a doctor's word about the person)
    r"|^(?:(?:and|also|oh|btw|honestly|so|but|ok|okay)[, ]+)*"
    r"(?:(?:the|a|an|another|other|some|one of (?:my|our|the)|my|our|his|her)\s+"
    r"(?!" + _CARERS + r")"
    r"(?:[\w'’.-]+\s+){0,5}?|(?:someone|somebody|people|everyone|everybody|they|folks)\s+(?:[\w'’.-]+\s+){0,4}?)"
    r"(?:say|says|said|reckon|reckons|claim|claims|told me|tells me|tell me|were saying|are saying|was saying|"
    r"is saying|keep saying|keeps saying|mentioned|heard)\b"
    r"|\bthere(?:'s|’s| is) (?:a |this )?(?:rumou?r|talk|gossip|word)\b",
    re.IGNORECASE)
_ZH_HEARSAY = re.compile(r"听说|是[\u4e00-\u9fff]{0,8}(?:跟我|和我|告诉我)说的|"
                         r"(?<!数)据说|听[\u4e00-\u9fff]{1,6}说|说是|都在传|传出来|不知道真假|真的假的|不知道准不准|"
                         r"^(?:我)?(?:有个|一个)?[\u4e00-\u9fff]{0,6}(?:同事|朋友|邻居|老乡|闺蜜|同学|室友|亲戚|中介)"
                         r"[\u4e00-\u9fff]{0,4}(?:说|讲)(?!话)")


def hearsay(text: str) -> bool:
    """True for what someone else says or a rumour passed on ("my colleague Rui says ...", 听说...)."""
    t = text.strip()
    return bool((_ZH_HEARSAY if HAN.search(t) else _EN_HEARSAY).search(t))


def proposable(text: str) -> bool:
    """What either extractor may propose: it stands on its own and is the person's own, not hearsay."""
    return stands_alone(text) and not hearsay(text)
