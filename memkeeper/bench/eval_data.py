"""The recall evaluation's data: users' memories written over a year, and their questions.

Generated deterministically from a seed (:func:`generate`): each user has a few hundred
memories — facts and preferences with keys, and notes — about eight people of their life,
from templates like "Ann is allergic to peanuts" / "安娜对花生过敏", written on days spread
over the 365 days before the evaluation's "now", some of them used since (recalled or found
on later days, most uses recent). Four users write English, two Chinese.

Questions, each with the one memory that answers it:

* **paraphrases** — the template's question, which shares the person's name with its
  evidence and nothing else of it ("which food makes Ann sick?"): its words are synonyms of
  the evidence's (:data:`CONCEPTS`), so the keyword signal alone sees only the name, which a
  few dozen of that user's memories share;
* **keyword questions** — the person and the object named ("Ann peanuts");
* **old answers** — paraphrases whose evidence is at least 180 days old and never used, while
  other memories of the same person were used in the last weeks;
* **no answer** — questions about something no memory says ("what is Ann's shoe size?").

:data:`CONCEPTS` is also the vocabulary of the bench's embeddings stand-in
(:func:`memkeeper.bench.embed_standin.standin_vector`): a crude model that knows these
synonyms and nothing else, so "hybrid" here measures fusion with an embedding that carries
some meaning — not any real model's quality.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

CONCEPTS: dict[str, tuple[str, ...]] = {
    "allergy": ("allergic", "allergy", "sick", "intolerant", "过敏", "忌口"),
    "music": ("plays", "instrument", "practice", "practices", "弹奏", "乐器"),
    "home": ("moved", "live", "lives", "living", "搬到", "住在"),
    "food": ("dish", "eat", "food", "meal", "爱吃", "菜肴"),
    "like": ("favourite", "likes", "like", "loves", "最爱", "喜欢"),
    "job": ("works", "job", "profession", "career", "工作", "职业"),
    "pet": ("adopted", "pet", "animal", "领养", "宠物"),
    "race": ("marathon", "race", "running", "马拉松", "比赛"),
    "train": ("training", "preparing", "prepares", "准备", "参加"),
    "party": ("birthday", "party", "celebration", "celebrate", "生日", "庆祝"),
    "car": ("drives", "car", "commute", "commutes", "开车", "汽车"),
    "book": ("novel", "book", "author", "reading", "小说", "作家"),
    "study": ("studies", "course", "class", "lessons", "学习", "课程"),
    "injury": ("sprained", "hurt", "injured", "injury", "扭伤", "受伤"),
}
"""Synonym groups: the meaning the stand-in knows."""


@dataclass(frozen=True)
class Template:
    slug: str  # the key's stem for keyed templates; "" for notes
    memory: str
    question: str
    things: tuple[str, ...]


EN_TEMPLATES = (
    Template(
        "allergy",
        "{name} is allergic to {thing}",
        "which food makes {name} sick?",
        ("peanuts", "shellfish", "gluten", "dairy", "eggs", "soy", "sesame", "kiwi"),
    ),
    Template(
        "",
        "{name} plays the {thing} every weekend",
        "what instrument does {name} practice?",
        ("violin", "piano", "cello", "guitar", "drums", "flute", "trumpet", "harp"),
    ),
    Template(
        "city",
        "{name} moved to {thing} last spring",
        "where does {name} live now?",
        ("Lisbon", "Denver", "Osaka", "Toronto", "Nairobi", "Oslo", "Perth", "Austin"),
    ),
    Template(
        "dish",
        "{name}'s favourite dish is {thing}",
        "what meal does {name} like most?",
        ("lasagna", "ramen", "paella", "curry", "tacos", "pho", "risotto", "dumplings"),
    ),
    Template(
        "",
        "{name} works as a {thing} at the hospital",
        "what is {name}'s profession?",
        (
            "nurse",
            "surgeon",
            "radiologist",
            "pharmacist",
            "porter",
            "therapist",
            "midwife",
            "cardiologist",
        ),
    ),
    Template(
        "pet",
        "{name} adopted a {thing} named Biscuit",
        "what animal does {name} keep?",
        ("beagle", "parrot", "tabby", "hamster", "terrier", "rabbit", "tortoise", "ferret"),
    ),
    Template(
        "",
        "{name} is training for the {thing} marathon",
        "which race is {name} preparing for?",
        ("Boston", "Berlin", "Chicago", "Tokyo", "London", "Paris", "Seoul", "Sydney"),
    ),
    Template(
        "party",
        "{name}'s birthday party is at the {thing}",
        "where is {name}'s celebration?",
        (
            "aquarium",
            "planetarium",
            "vineyard",
            "brewery",
            "bistro",
            "arcade",
            "greenhouse",
            "ballroom",
        ),
    ),
    Template(
        "",
        "{name} drives a {thing} to the office",
        "what car does {name} commute in?",
        ("Volvo", "Tesla", "Subaru", "Mazda", "Jeep", "Prius", "Beetle", "Mini"),
    ),
    Template(
        "book",
        "{name} is reading a novel by {thing}",
        "which author is {name}'s book by?",
        ("Murakami", "Atwood", "Tolkien", "Austen", "Orwell", "Morrison", "Borges", "Dickens"),
    ),
    Template(
        "",
        "{name} studies {thing} at night school",
        "what course is {name} taking?",
        (
            "Japanese",
            "accounting",
            "welding",
            "pottery",
            "coding",
            "botany",
            "sculpture",
            "astronomy",
        ),
    ),
    Template(
        "",
        "{name} sprained an ankle playing {thing}",
        "what sport got {name} hurt?",
        ("tennis", "squash", "soccer", "hockey", "rugby", "volleyball", "badminton", "cricket"),
    ),
)

ZH_TEMPLATES = (
    Template(
        "allergy",
        "{name}对{thing}过敏",
        "{name}忌口什么",
        ("花生", "海鲜", "牛奶", "鸡蛋", "芒果", "小麦", "芝麻", "大豆"),
    ),
    Template(
        "",
        "{name}每周末弹奏{thing}",
        "{name}会哪种乐器",
        ("钢琴", "古筝", "吉他", "二胡", "琵琶", "竖琴", "口琴", "扬琴"),
    ),
    Template(
        "city",
        "{name}去年春天搬到了{thing}",
        "{name}现在住在哪个城市",
        ("成都", "杭州", "厦门", "青岛", "昆明", "西安", "苏州", "大连"),
    ),
    Template(
        "dish",
        "{name}最爱吃{thing}",
        "{name}喜欢什么菜肴",
        ("火锅", "烤鸭", "饺子", "米线", "煎饼", "包子", "拉面", "烧烤"),
    ),
    Template(
        "",
        "{name}在医院工作,是{thing}",
        "{name}的职业是什么",
        ("护士", "医生", "药师", "护工", "院长", "麻醉师", "营养师", "检验师"),
    ),
    Template(
        "pet",
        "{name}领养了一只{thing}",
        "{name}养了什么宠物",
        ("柯基", "鹦鹉", "橘猫", "仓鼠", "金鱼", "兔子", "乌龟", "刺猬"),
    ),
    Template(
        "",
        "{name}正在准备{thing}马拉松",
        "{name}要参加哪场比赛",
        ("北京", "上海", "广州", "深圳", "武汉", "南京", "重庆", "天津"),
    ),
    Template(
        "party",
        "{name}的生日派对在{thing}办",
        "{name}在哪里庆祝",
        ("酒吧", "餐厅", "公园", "茶馆", "酒店", "海边", "农庄", "书店"),
    ),
)

EN_NAMES = ("Ann", "Ben", "Carla", "Dev", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonah")
ZH_NAMES = ("安娜", "本杰", "卡拉", "大伟", "艾丽", "法里", "格蕾", "雨果", "伊内", "乔纳")
EN_NO_ANSWER = ("what is {name}'s shoe size?", "does {name} own a sailboat?",
                "what is {name}'s blood type?", "which bank does {name} use?")  # fmt: skip
ZH_NO_ANSWER = ("{name}穿多大的鞋", "{name}有没有帆船", "{name}的血型是什么", "{name}用哪家银行")


EN_FILLERS = (
    "{name} called about the {thing} this weekend",
    "had lunch with {name} near the {thing}",
    "{name} sent photos of the {thing}",
    "remind {name} to bring the {thing} on Friday",
    "{name} asked whether the {thing} is still open",
    "talked to {name} about the {thing} for an hour",
)
EN_FILLER_WORDS = (
    "garden", "museum", "bakery", "harbour", "station", "library", "market", "stadium",
    "bridge", "festival", "cinema", "lake", "gallery", "school",
)  # fmt: skip
ZH_FILLERS = (
    "{name}打电话说周末去{thing}",
    "和{name}在{thing}附近吃了午饭",
    "{name}发来了{thing}的照片",
    "提醒{name}周五带上{thing}的票",
    "{name}问{thing}还开不开门",
    "和{name}聊了一个小时{thing}的事",
)
ZH_FILLER_WORDS = ("花园", "博物馆", "面包店", "港口", "车站", "图书馆", "市场", "体育场",
                   "大桥", "音乐节", "电影院", "湖边", "画廊", "学校")  # fmt: skip


EVAL_NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
"""The evaluation's "now": memories are up to a year older."""


@dataclass(frozen=True)
class EvalMemory:
    ref: str
    user: str
    kind: str
    key: str | None
    value: str
    confidence: float
    created: datetime
    used: tuple[datetime, ...]  # the days it was used on, oldest first


@dataclass(frozen=True)
class EvalQuestion:
    user: str
    query: str
    kind: str  # "paraphrase", "keyword", "old", "none"
    expect: str | None  # the ref of the answering memory; None for "none"


@dataclass(frozen=True)
class EvalSet:
    now: datetime
    memories: list[EvalMemory]
    questions: list[EvalQuestion]


def generate(
    *, seed: int = 21, users: int = 6, fillers_per_user: int = 160, questions: int = 40,
    now: datetime = EVAL_NOW,
) -> EvalSet:  # fmt: skip
    """The evaluation set: ``users`` users (two of three English, the rest Chinese), each
    with one memory per template and person, ``fillers_per_user`` everyday notes about the
    same people, and about ``questions`` questions."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible data set, not a secret
    memories: list[EvalMemory] = []
    asked: list[EvalQuestion] = []
    for u in range(users):
        chinese = u % 3 == 2
        user = f"eval-{'zh' if chinese else 'en'}-{u}"
        templates = ZH_TEMPLATES if chinese else EN_TEMPLATES
        names = ZH_NAMES if chinese else EN_NAMES
        mine: list[tuple[EvalMemory, Template, str, str]] = []
        for t, template in enumerate(templates):
            for c, name in enumerate(names):  # one per person: one answer per question
                thing = rng.choice(template.things)
                memory = _memory(rng, user, f"{user}/{t}/{c}", template, name, thing, now)
                mine.append((memory, template, name, thing))
        memories += [m for m, *_ in mine]
        fillers = ZH_FILLERS if chinese else EN_FILLERS
        words = ZH_FILLER_WORDS if chinese else EN_FILLER_WORDS
        for f in range(fillers_per_user):
            text = rng.choice(fillers).format(name=rng.choice(names), thing=rng.choice(words))
            filler = Template("", text, "", ("",))
            memories.append(_memory(rng, user, f"{user}/filler/{f}", filler, "", "", now))
        asked += _questions(rng, user, mine, names, chinese, questions)
    return EvalSet(now, memories, asked)


def _memory(
    rng: random.Random, user: str, ref: str, template: Template, name: str, thing: str,
    now: datetime,
) -> EvalMemory:  # fmt: skip
    created = now - timedelta(days=rng.uniform(1, 365), minutes=rng.randrange(1440))
    uses: list[datetime] = []
    if rng.random() < 0.45:  # used since: mostly in the last weeks
        for _ in range(rng.randint(1, 6)):
            age = min(rng.expovariate(1 / 20), (now - created).days)
            uses.append(now - timedelta(days=age, minutes=rng.randrange(1440)))
    value = template.memory.format(name=name, thing=thing) if name else template.memory
    key = None
    if template.slug and rng.random() < 0.7:
        key = f"{template.slug}_{_slug(name)}_{_slug(thing)}"
    kind = "note" if key is None else rng.choice(("fact", "preference"))
    return EvalMemory(
        ref, user, kind, key, value, round(rng.uniform(0.7, 1.0), 2), created, tuple(sorted(uses))
    )


def _slug(text: str) -> str:
    return (
        "".join(c for c in text.lower() if c.isalnum())
        if text.isascii()
        else str(sum(map(ord, text)) % 1000)
    )


def _questions(
    rng: random.Random, user: str, mine: list[tuple[EvalMemory, Template, str, str]],
    names: tuple[str, ...], chinese: bool, count: int,
) -> list[EvalQuestion]:  # fmt: skip
    out: list[EvalQuestion] = []
    horizon = max(m.created for m, *_ in mine)
    old = [item for item in mine if not item[0].used and (horizon - item[0].created).days >= 180]
    pool = rng.sample(mine, min(len(mine), count))
    taken: set[str] = set()
    for memory, template, name, _ in pool[: count // 2]:
        out.append(
            EvalQuestion(user, template.question.format(name=name), "paraphrase", memory.ref)
        )
        taken.add(memory.ref)
    for memory, _, name, thing in pool[count // 2 : count // 2 + count // 4]:
        query = f"{name}{thing}" if chinese else f"{name} {thing}"
        out.append(EvalQuestion(user, query, "keyword", memory.ref))
        taken.add(memory.ref)
    for memory, template, name, _ in [i for i in old if i[0].ref not in taken][: count // 4]:
        out.append(EvalQuestion(user, template.question.format(name=name), "old", memory.ref))
    for name in rng.sample(names, 3):
        form = rng.choice(ZH_NO_ANSWER if chinese else EN_NO_ANSWER)
        out.append(EvalQuestion(user, form.format(name=name), "none", None))
    return out
