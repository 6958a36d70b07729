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
_EN_NAMED = re.compile(
    r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'’-]+"  # a capitalised word not opening a sentence
    r"|\b(?i:my|our|his|her|their|the|a|an|this|that)\s+(?:[\w'’-]+\s+){0,3}?[\w'’-]+"
    r"|\b(?i:hate|hates|love|loves|like|likes|prefer|prefers|have|has|own|owns|bought|use|uses|need|needs|"
    r"allergic to|can't stand|cannot stand)\s+[\w'’-]+")
_EN_OPENING_NAME = re.compile(r"(?:^|[.!?]\s+)(?!(?:I|I'm|I've|I'll|I'd|He|She|It|They|We|This|That|Then|"
                              r"There|Please|Also|And|But|So|Oh|Actually|Wait)\b)[A-Z][a-z][\w'’-]*")
_EN_PRONOUN = re.compile(r"\b(?:he|she|him|his|her|hers|they|them|their|its|it(?!(?:['’]s| is)? (?:(?:been|getting) )?"
                         r"(?:rains?|raining|snows?|snowing|cold|hot|late|early|dark|sunny)\b))\b", re.IGNORECASE)
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
    r"|\binstead\b|\b(?:not|rather than) (?:the )?\d{1,2}(?:st|nd|rd|th)?\b"
    r"|\bthe (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|day|week) (?:after|before)\b(?!\s+(?:\w+\s+){0,3}\w)"
    r"|\b(?:here|there)\b(?!\s*(?:is|are|was|were|'s|’s|will|might|may)\b)", re.IGNORECASE)

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
                           r"|(?:商量|考虑|想|看|问|试|聊)一下(?:吧)?$|试试(?:看)?$")


def stands_alone(text: str) -> bool:
    """True when nothing in the text leans on words said outside it."""
    t = text.strip()
    if HAN.search(t):
        if _ZH_ELSEWHERE.search(t):
            return False
        m = _ZH_PRONOUN.search(t)
        return m is None or bool(_ZH_NAMED.search(t, 0, m.start()))
    if _EN_ELSEWHERE.search(t) or _EN_DEMONSTRATIVE.search(t):
        return False
    m = _EN_PRONOUN.search(t)
    if m is None:
        return True
    before = t[:m.start()]
    if not before.strip():  # a pronoun first may name its referent after it ("He's terrified of flying, my dad")
        return bool(_EN_NAMED_AFTER.search(t, m.end()))
    return bool(_EN_NAMED.search(before) or _EN_OPENING_NAME.search(before))


# what someone else says, or a rumour passed on: not the person's own memory, whoever it names
_EN_HEARSAY = re.compile(
    r"^(?:(?:and|also|oh|btw|honestly|so|but|random,? but)[, ]+)*(?:apparently|supposedly|rumou?r (?:has it|is)|"
    r"i(?:'ve)? (?:also )?heard|heard|word is|"
    r"(?:(?:my|our|his|her) (?!(?:doctor|gp|physio|physiotherapist|dentist|therapist|nurse|surgeon|vet|"
    r"cardiologist|specialist)\b)[\w' -]{1,30}?|[A-Z][a-z]+(?: from [\w ]{1,20}?)?) "
    r"(?:says|said|reckons|claims|told me|thinks)\b)",
    re.IGNORECASE)
_ZH_HEARSAY = re.compile(r"听说|(?<!数)据说|听[\u4e00-\u9fff]{1,6}说|说是|都在传|传出来|不知道真假|真的假的|不知道准不准|"
                         r"^(?:我)?(?:有个|一个)?[\u4e00-\u9fff]{0,6}(?:同事|朋友|邻居|老乡|闺蜜|同学|室友|亲戚|中介)"
                         r"[\u4e00-\u9fff]{0,4}(?:说|讲)(?!话)")


def hearsay(text: str) -> bool:
    """True for what someone else says or a rumour passed on ("my colleague Rui says ...", 听说...)."""
    t = text.strip()
    return bool((_ZH_HEARSAY if HAN.search(t) else _EN_HEARSAY).search(t))


def proposable(text: str) -> bool:
    """What either extractor may propose: it stands on its own and is the person's own, not hearsay."""
    return stands_alone(text) and not hearsay(text)
