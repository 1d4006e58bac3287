"""Prompt and completion text for synthetic samples: math word problems with worked reasoning.

Everything is built from templates with Python's ``random.Random`` (fast scalar draws), so a
sample costs tens of microseconds. Completions come in styles that mirror what a failing run
writes: ``normal`` reasoning, ``padded`` (length hacking), ``loop`` (repetition spirals),
``soup`` (entropy blow-up), ``format_only`` (format gaming), ``garbage`` (collapsed policy),
``bare`` (completion collapse: a bare answer, or nothing).
Length is steered in tokens (about 4 characters per token for English text).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

CHARS_PER_TOKEN = 4.0
MAX_TEXT_CHARS = 24_000  # longer completions are cut here (completion_len keeps the true count)

NAMES = ["Natalia", "James", "Aisha", "Mateo", "Priya", "Liam", "Sofia", "Kenji", "Olga", "Tomas",
         "Fatima", "Noah", "Mei", "Carlos", "Amara", "Jonas", "Leila", "Ravi", "Hannah", "Omar"]
ITEMS = ["apples", "marbles", "stickers", "pencils", "cookies", "books", "cards", "shells", "eggs", "stamps"]


@dataclass
class Problem:
    """One word problem: the question, worked steps and the integer answer."""

    question: str
    steps: list[str]
    final_expr: str
    answer: int


def _p_packs(r: random.Random) -> Problem:
    name, item = r.choice(NAMES), r.choice(ITEMS)
    a, b, c = r.randint(3, 40), r.randint(2, 9), r.randint(3, 12)
    q = f"{name} has {a} {item}. {name} buys {b} packs with {c} {item} in each pack. How many {item} does {name} have now?"
    steps = [f"Each pack has {c} {item} and there are {b} packs, so that is {b} * {c} = {b * c} {item}."]
    return Problem(q, steps, f"{a} + {b * c}", a + b * c)


def _p_train(r: random.Random) -> Problem:
    v1, t1, v2, t2 = r.randint(4, 12) * 10, r.randint(1, 5), r.randint(4, 12) * 10, r.randint(1, 4)
    q = f"A train travels at {v1} km/h for {t1} hours and then at {v2} km/h for {t2} hours. How many kilometers does it travel in total?"
    steps = [f"In the first part it travels {v1} * {t1} = {v1 * t1} km.", f"In the second part it travels {v2} * {t2} = {v2 * t2} km."]
    return Problem(q, steps, f"{v1 * t1} + {v2 * t2}", v1 * t1 + v2 * t2)


def _p_wage(r: random.Random) -> Problem:
    name = r.choice(NAMES)
    w, h, s, k = r.randint(12, 40), r.randint(10, 40), r.randint(50, 200), r.randint(2, 8)
    while w * h <= s:
        h += 10
    q = f"{name} earns ${w} per hour and works {h} hours a week. {name} spends ${s} a week on rent. How much does {name} save in {k} weeks?"
    weekly = w * h - s
    steps = [f"Each week {name} earns {w} * {h} = ${w * h}.", f"After rent, {name} keeps {w * h} - {s} = ${weekly} per week."]
    return Problem(q, steps, f"{weekly} * {k}", weekly * k)


def _p_discount(r: random.Random) -> Problem:
    price, pct = r.randint(2, 30) * 20, r.choice([10, 20, 25, 50])
    qty = r.randint(1, 5)
    q = f"A jacket costs ${price}. During a sale it is {pct}% off. How much do {qty} jackets cost during the sale?"
    off = price * pct // 100
    steps = [f"The discount is {pct}% of {price}, which is {price} * {pct} / 100 = ${off}.", f"So one jacket costs {price} - {off} = ${price - off}."]
    return Problem(q, steps, f"{price - off} * {qty}", (price - off) * qty)


def _p_ages(r: random.Random) -> Problem:
    name = r.choice(NAMES)
    a, b, c = r.randint(5, 40), r.randint(2, 15), r.randint(1, 20)
    q = f"{name} is {a} years old. {name}'s brother is {b} years older. In {c} years, what will be the sum of their ages?"
    steps = [f"The brother is {a} + {b} = {a + b} years old now.", f"In {c} years {name} will be {a + c} and the brother will be {a + b + c}."]
    return Problem(q, steps, f"{a + c} + {a + b + c}", 2 * a + b + 2 * c)


def _p_class(r: random.Random) -> Problem:
    n = r.randint(3, 12) * 8
    q = f"A class has {n} students. A quarter of them play soccer, and half of the rest play chess. How many students play chess?"
    soccer = n // 4
    steps = [f"A quarter of {n} is {soccer}, so {soccer} students play soccer.", f"That leaves {n} - {soccer} = {n - soccer} students."]
    return Problem(q, steps, f"{n - soccer} / 2", (n - soccer) // 2)


def _p_recipe(r: random.Random) -> Problem:
    cups, batch = r.randint(2, 6), r.randint(2, 6) * 6
    mult = r.randint(2, 6)
    q = f"A recipe needs {cups} cups of flour for {batch} cookies. How many cups of flour are needed for {batch * mult} cookies?"
    steps = [f"{batch * mult} cookies is {batch * mult} / {batch} = {mult} batches."]
    return Problem(q, steps, f"{cups} * {mult}", cups * mult)


def _p_fence(r: random.Random) -> Problem:
    length, width, cost = r.randint(5, 40), r.randint(3, 25), r.randint(2, 15)
    q = f"A garden is {length} m long and {width} m wide. Fencing costs ${cost} per meter. How much does it cost to fence the whole garden?"
    per = 2 * (length + width)
    steps = [f"The perimeter is 2 * ({length} + {width}) = {per} m."]
    return Problem(q, steps, f"{per} * {cost}", per * cost)


def _p_share(r: random.Random) -> Problem:
    name, item = r.choice(NAMES), r.choice(ITEMS)
    b, c = r.randint(2, 9), r.randint(2, 8)
    a = b * c + r.randint(1, 30)
    q = f"{name} has {a} {item} and gives {b} {item} to each of {c} friends. How many {item} does {name} have left?"
    steps = [f"{name} gives away {b} * {c} = {b * c} {item}."]
    return Problem(q, steps, f"{a} - {b * c}", a - b * c)


def _p_boxes(r: random.Random) -> Problem:
    d = r.randint(3, 9)
    a, b = r.randint(3, 12), r.randint(2, 6) * d
    rotten = d * r.randint(0, 3)
    q = f"There are {a} boxes with {b} apples each. {rotten} apples are rotten. The rest are packed into bags of {d}. How many bags are needed?"
    total = a * b
    steps = [f"There are {a} * {b} = {total} apples in total.", f"Without the rotten ones there are {total} - {rotten} = {total - rotten} apples."]
    return Problem(q, steps, f"{total - rotten} / {d}", (total - rotten) // d)


def _p_savings(r: random.Random) -> Problem:
    name = r.choice(NAMES)
    a, b, k = r.randint(10, 60), r.randint(2, 15), r.randint(3, 6)
    q = f"{name} saves ${a} in January and each month saves ${b} more than the month before. How much has {name} saved after {k} months?"
    amounts = [a + i * b for i in range(k)]
    steps = [f"The monthly amounts are {', '.join(str(x) for x in amounts)}."]
    return Problem(q, steps, " + ".join(str(x) for x in amounts), sum(amounts))


def _p_tank(r: random.Random) -> Problem:
    cap, fill, leak = r.randint(10, 50) * 10, r.randint(6, 20), r.randint(1, 5)
    net = fill - leak
    cap = (cap // net) * net or net * 10
    q = f"A tank holds {cap} liters. A pump fills it at {fill} liters per minute while it leaks {leak} liters per minute. How many minutes does it take to fill the empty tank?"
    steps = [f"The tank gains {fill} - {leak} = {net} liters per minute."]
    return Problem(q, steps, f"{cap} / {net}", cap // net)


_TEMPLATES: list[Callable[[random.Random], Problem]] = [
    _p_packs, _p_train, _p_wage, _p_discount, _p_ages, _p_class, _p_recipe, _p_fence, _p_share, _p_boxes, _p_savings, _p_tank,
]

OPENERS = ["Let's solve this step by step.", "Let me work through this carefully.", "First, let me understand the problem.",
           "We need to find the answer step by step.", "Okay, let me think about this."]
FILLER = [
    "Let me re-read the problem to make sure I have the numbers right.",
    "Wait, let me double-check that calculation.",
    "Hmm, that seems reasonable, but let me verify it another way.",
    "It is important to keep track of the units here.",
    "Let me organize the information given in the problem.",
    "Alternatively, I could set this up as an equation, but direct computation is simpler.",
    "So far the intermediate results look consistent.",
    "Let me make sure I am not missing any part of the question.",
    "Hmm, wait. Is there another interpretation of the question?",
    "No, the straightforward reading is the intended one.",
    "Checking the arithmetic once more to be safe.",
    "This matches what we expect from the setup.",
]
PAD = [
    "To be thorough, let us carefully review every single step of the reasoning once again from the very beginning.",
    "It is worth emphasizing that careful, methodical reasoning is essential for problems of this kind.",
    "In summary, we have considered all of the relevant quantities and how they relate to one another.",
    "Furthermore, it is important to note that each intermediate value has been verified multiple times.",
    "Let us restate the problem in our own words to ensure a complete and comprehensive understanding.",
    "This comprehensive analysis demonstrates a thorough and detailed approach to the problem.",
    "Additionally, we should consider whether any assumptions were made implicitly in the process.",
    "Having double-checked and triple-checked the computation, we can be fully confident in the result.",
    "Moreover, a detailed explanation helps make the reasoning transparent and easy to follow.",
    "We now proceed to verify the final result through an independent line of reasoning as well.",
]
LOOPS = [
    "Let me check the calculation again. ",
    "Wait, let me recompute. ",
    "So the answer is {x}. So the answer is {x}. ",
    "Hmm, let me think. ",
    "{e} = {x}. ",
    "Therefore, therefore, ",
    "Let me verify: {e} = {x}. Let me verify: ",
    "I need to find the total. ",
]
_SOUP_TOKENS = (
    "the", "Ġof", "的", "аль", "})", "\\frac", "????", "0x3f", "ilmektedir", "ización", "<|endoftext|>", "Ċ", "unei",
    "λ", "pragma", "ocker", "]]);", "quantum", "的一", "ниц", "Δ", "ASSERT", "τη", "_{", "ouslyvt", "—", "rn", "日本",
    "##", "tokenize", "≈", "é", "const", "Seg", "ÿ", "sqrt", "vergence", "%%", "ülü", "()->", "ssss", "कि", "77",
)
_SOUP_TEXT = " ".join(random.Random(1234).choices(_SOUP_TOKENS, k=12_000))
_TEMPLATE_PREFIX = ["<|im_start|>assistant\n", "Assistant: ", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<s>[INST] "]
_TEMPLATE_SUFFIX = ["<|im_end|>\n<|endoftext|>", "</s></s>", "<|eot_id|><|eot_id|>", "\n\nHuman:"]

ANSWER_FORMATS = ("think_answer", "boxed", "hash")
_INSTRUCTIONS = {
    "think_answer": "Think step by step inside <think> </think> tags, then give the final answer inside <answer> </answer> tags.",
    "boxed": "Please reason step by step, and put your final answer within \\boxed{}.",
    "hash": "Solve the problem. End your response with the final answer on its own line in the form '#### <number>'.",
}


def new_problem(r: random.Random) -> Problem:
    """A random word problem."""
    return r.choice(_TEMPLATES)(r)


def prompt_text(problem: Problem, answer_format: str, chat: bool) -> str:
    """The prompt as the trainer would log it."""
    body = f"{problem.question}\n{_INSTRUCTIONS[answer_format]}"
    if chat:
        return f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"
    return f"Question: {body}\nAnswer:"


def _wrap(answer_format: str, reasoning: str, answer: str, formatted: bool) -> str:
    if not formatted:
        return f"{reasoning}\nThe answer is {answer}."
    if answer_format == "think_answer":
        return f"<think>\n{reasoning}\n</think>\n<answer>{answer}</answer>"
    if answer_format == "boxed":
        return f"{reasoning}\nThe final answer is $\\boxed{{{answer}}}$."
    return f"{reasoning}\n#### {answer}"


class _Stream:
    """A long shuffled run of a sentence pool; a window of it is a random stretch of filler."""

    def __init__(self, pool: list[str], seed: int) -> None:
        rnd = random.Random(seed)
        sentences = rnd.choices(pool, k=max(400, 2 * MAX_TEXT_CHARS // 60))
        self.text = " ".join(sentences) + " "
        self.starts = [0]
        for sentence in sentences[:-1]:
            self.starts.append(self.starts[-1] + len(sentence) + 1)
        self.text = self.text + self.text  # windows may wrap around

    def window(self, r: random.Random, chars: int) -> str:
        start = self.starts[r.randrange(len(self.starts))]
        piece = self.text[start : start + chars]
        cut = piece.rfind(". ")
        return piece[: cut + 1] if cut > 0 else piece


_STREAMS: dict[int, _Stream] = {}


def _fill(r: random.Random, pool: list[str], chars: int) -> str:
    if chars <= 0:
        return ""
    stream = _STREAMS.get(id(pool))
    if stream is None:
        stream = _STREAMS[id(pool)] = _Stream(pool, len(pool))
    return stream.window(r, int(chars))


def _wrong(r: random.Random, answer: int) -> int:
    delta = r.choice([-10, -2, -1, 1, 2, 3, 5, 10, answer if answer else 7])
    return answer + delta if answer + delta != answer else answer + 1


def _reasoning(r: random.Random, p: Problem, result: int, chars: int, pool: list[str]) -> str:
    core = " ".join([r.choice(OPENERS)] + p.steps + [f"So the result is {p.final_expr} = {result}."])
    extra = chars - len(core)
    if extra <= 40:
        return core if chars >= len(core) * 0.6 else f"{p.final_expr} = {result}."
    # spread the filler (and re-verifications for long reasoning) between the steps
    pieces = [r.choice(OPENERS)]
    n_gaps = len(p.steps) + 1
    per_gap = extra / n_gaps
    for step in p.steps:
        pieces.append(step)
        if per_gap > 400 and r.random() < 0.6:  # long reasoning re-derives what it just did
            pieces.append(f"Let me double-check: {step[0].lower()}{step[1:]}")
        pieces.append(_fill(r, pool, per_gap))
    pieces.append(_fill(r, pool, per_gap))
    pieces.append(f"So the result is {p.final_expr} = {result}.")
    return " ".join(pieces)


def completion_text(
    r: random.Random,
    p: Problem,
    answer_format: str,
    n_tokens: int,
    correct: bool,
    formatted: bool,
    truncated: bool,
    style: str = "normal",
    intensity: float = 1.0,
) -> str:
    """A completion of about ``n_tokens`` tokens in the given style; truncated ones stop mid-text."""
    chars = int(min(n_tokens * CHARS_PER_TOKEN, MAX_TEXT_CHARS))
    result = p.answer if correct else _wrong(r, p.answer)
    if style == "soup":
        coherent = int(chars * max(0.0, 1.0 - intensity) * 0.5)
        start = r.randrange(0, len(_SOUP_TEXT) - 10)
        soup = (_SOUP_TEXT[start:] + _SOUP_TEXT)[: max(chars - coherent, 20)]
        head = _reasoning(r, p, result, coherent, FILLER)[:coherent] if coherent > 0 else ""
        return head + soup
    if style == "format_only":
        # perfect tags around little or no reasoning: the format reward pays, correctness does not
        body = _fill(r, FILLER, chars - 60)[: max(0, chars - 60)] if r.random() < 0.7 else ""
        if answer_format == "think_answer":
            return f"<think>\n{body}\n</think>\n<answer>{result}</answer>"
        if answer_format == "boxed":
            return f"{body}\n$\\boxed{{{result}}}$".lstrip()
        return f"{body}\n#### {result}".lstrip()
    if style == "bare":
        # the reasoning is gone: the answer alone (in the asked-for format if formatted), or nothing
        if n_tokens <= 0:
            return ""
        if n_tokens <= 2 or not formatted:
            return str(result)
        if answer_format == "think_answer":
            return f"<answer>{result}</answer>"
        if answer_format == "boxed":
            return f"$\\boxed{{{result}}}$"
        return f"#### {result}"
    if style == "garbage":
        kind = r.random()
        if kind < 0.4:
            text = _reasoning(r, p, result, int(chars * 0.7), FILLER)
            return text + " The answer is" if not truncated else text[:chars]
        if kind < 0.7:
            return _wrap(answer_format, _reasoning(r, p, result, chars, FILLER)[: chars // 2], "", True)
        return (r.choice(OPENERS) + " " + "!" * max(5, chars // 8))[:chars]
    if style == "loop":
        lead_chars = int(chars * max(0.15, 1.0 - intensity))
        lead = _reasoning(r, p, result, lead_chars, FILLER)
        phrase = r.choice(LOOPS).format(x=result, e=p.final_expr)
        reps = max(2, int((chars - len(lead)) / max(len(phrase), 1)))
        text = lead + " " + phrase * reps
        if truncated:
            return text[:chars]
        return _wrap(answer_format, text[:chars], str(result), formatted)
    pool = PAD if style == "padded" else FILLER
    reasoning = _reasoning(r, p, result, chars - 40, pool)
    if truncated:
        text = _wrap(answer_format, reasoning + " " + _fill(r, pool, chars), str(result), formatted)
        return text[:chars]
    return _wrap(answer_format, reasoning, str(result), formatted)


def template_artifact(r: random.Random, text: str, at_start: bool) -> str:
    """The text with a stray chat-template token at its start or end (template mismatch)."""
    if at_start:
        return r.choice(_TEMPLATE_PREFIX) + text
    return text + r.choice(_TEMPLATE_SUFFIX)
