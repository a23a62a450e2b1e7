"""Generate the recall evaluation set: bench/data/recall_memories.jsonl and recall_questions.jsonl.

    python -m bench.recall_dataset          # rewrites both files (deterministic, seed 12)

A year of conversations between one user and the agent, in sessions: each memory
is one turn (the user's or the agent's), with its session's date as `event_time`.
Facts about ~70 people (where they moved, their work, pets, birthdays, hobbies,
injuries, shared meals), the user's plans (trips: where, with whom, what for) and
preferences, among chit-chat that names the same people and places in other
contexts, so a name alone does not find the evidence.

Questions paraphrase their evidence: "moved to Porto for a new job" is asked as
"Which city did Hannah relocate to?", "adopted a beagle puppy" as "What kind of
animal did Hannah get?". Each question lists the `bench_id`s of its evidence; the
memories carry theirs in metadata.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

DATA = Path(__file__).parent / "data"
MEMORIES = DATA / "recall_memories.jsonl"
QUESTIONS = DATA / "recall_questions.jsonl"
SEED = 12
END = datetime(2026, 10, 31, 18, 0, tzinfo=UTC)
SESSIONS = 140

NAMES = """Hannah Marco Priya Tobias Elena Kwame Sofia Liam Ayesha Jonas Mei Rafael Ingrid Omar Clara
Dmitri Nadia Felix Yuki Samuel Leila Mateo Greta Arjun Chloe Viktor Amara Hugo Rosa Tariq Freya Luca
Zara Emil Beatrice Kenji Olivia Rashid Martina Pavel Imani Sven Lucia Dario Noor Anton Maya Ezra
Carmen Bruno Ada Idris Paula Stefan Hana Joaquin Vera Malik Irene Caspar Selin Theo Ruth Nikolai
Juno Anders Lola Wendell Farah""".split()
RELATIONS = ["sister", "brother", "cousin", "colleague", "neighbour", "old school friend", "aunt", "uncle",
             "flatmate", "climbing partner", "manager", "friend from yoga", "niece", "nephew", "best friend"]
CITIES = ["Porto", "Lisbon", "Vienna", "Krakow", "Montreal", "Osaka", "Nairobi", "Lyon", "Bergen", "Seville",
          "Edinburgh", "Tallinn", "Valparaiso", "Hanoi", "Ghent", "Bologna", "Reykjavik", "Zagreb", "Cusco",
          "Marrakesh", "Tbilisi", "Hobart", "Ljubljana", "Tromso", "Dubrovnik", "Kyoto", "Antwerp", "Galway"]
JOBS = [("a paramedic", "saves lives in an ambulance crew"), ("a pastry chef", "bakes desserts for a restaurant"),
        ("a structural engineer", "designs bridges"), ("a primary school teacher", "teaches young children"),
        ("a veterinarian", "treats sick animals"), ("a tax lawyer", "advises firms on taxes"),
        ("a software developer", "writes code for a bank"), ("a nurse", "works night shifts on a hospital ward"),
        ("a carpenter", "builds furniture by hand"), ("a pilot", "flies cargo planes"),
        ("a journalist", "writes for a newspaper"), ("a dentist", "fixes teeth"),
        ("an architect", "draws plans for houses"), ("a florist", "arranges flowers in a shop"),
        ("a translator", "turns Japanese novels into English"), ("a firefighter", "puts out fires")]
PETS = [("a beagle puppy", "dog"), ("a grey kitten", "cat"), ("two budgies", "birds"), ("a tortoise", "reptile"),
        ("a rescue greyhound", "dog"), ("a ginger cat", "cat"), ("a pair of rabbits", "rabbits"),
        ("a goldfish", "fish"), ("a border collie", "dog"), ("a parrot", "bird")]
PET_NAMES = ["Biscuit", "Pepper", "Noodle", "Maple", "Ziggy", "Olive", "Pickle", "Juniper", "Waffles", "Mochi",
             "Pretzel", "Clementine", "Bramble", "Tofu", "Cricket", "Nutmeg"]
INSTRUMENTS = ["cello", "ukulele", "saxophone", "harp", "drums", "violin", "banjo", "trumpet", "accordion",
               "clarinet", "piano", "bass guitar"]
INJURIES = [("broke an ankle", "skiing", "hurt"), ("sprained a wrist", "bouldering", "injured"),
            ("tore a knee ligament", "playing football", "hurt"), ("cracked a rib", "falling off a bike", "injured"),
            ("dislocated a shoulder", "surfing", "hurt")]
RESTAURANTS = ["a tiny ramen bar", "a Georgian restaurant", "a vegan taqueria", "an old Portuguese tavern",
               "a rooftop pizzeria", "a Lebanese grill", "a sushi counter", "a Sichuan hot-pot place",
               "an Ethiopian restaurant", "a French bistro"]
ACTIVITIES = [("hike the coastal trail", "hiking"), ("see a jazz festival", "music"),
              ("run a half marathon", "running"), ("visit the old observatory", "astronomy"),
              ("take a pottery workshop", "ceramics"), ("go whale watching", "wildlife"),
              ("cycle along the river", "cycling"), ("attend a friend's wedding", "a wedding"),
              ("learn to surf", "surfing"), ("tour the wine cellars", "wine tasting")]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]

# (memory templates, question templates, kind). Questions never reuse the memory's verb.
FACTS = {
    "moved": (["{name}, my {rel}, just moved to {city} for a new job.",
               "Big news from {name}: my {rel} has relocated to {city} and starts work there next week.",
               "{name} packed up the flat and now lives in {city}."],
              ["Which city did {name} relocate to?", "Where is {name} living these days?",
               "To what place did my {rel} {name} move?"]),
    "job": (["{name} works as {job}; {name} {jobline}.", "My {rel} {name} has a job as {job}."],
            ["What does {name} do for a living?", "What is {name}'s profession?",
             "What kind of work does my {rel} {name} do?"]),
    "pet": (["{name} adopted {pet} and called it {petname}.",
             "Meet {petname}: {name} brought home {pet} on Saturday."],
            ["What kind of animal did {name} get?", "What is the name of {name}'s new {petkind}?",
             "Which pet joined {name}'s household?"]),
    "birthday": (["{name}'s birthday is on {month} {day}; I need to find a present.",
                  "Reminder to myself: {name} turns {age} on {month} {day}."],
                 ["When does {name} celebrate getting a year older?", "On what date is {name} born?",
                  "When should I buy a present for {name}?"]),
    "hobby": (["{name} has been taking {instrument} lessons since the spring.",
               "{name} practises the {instrument} every evening now, the neighbours love it."],
              ["Which musical instrument is {name} learning?", "What does {name} play in the evenings?"]),
    "injury": (["{name} {injury} while {cause} last weekend.", "Poor {name}: {injury} {cause}."],
               ["How did {name} get {hurt}?", "What accident did my {rel} {name} have?"]),
    "meal": (["Had dinner with {name} at {restaurant}; we talked for hours.",
              "{name} and I ate at {restaurant} tonight, great food."],
             ["Where did I eat out with {name}?", "What kind of place did {name} and I have supper at?"]),
}
PLAN_M1 = ["Next {month} I'm going to {city} to {activity}.", "I booked flights to {city} for {month}; "
           "the plan is to {activity}."]
PLAN_M2 = ["{name} said yes, my {rel} will come along on the {city} trip.",
           "Good news: {name} is joining me when I travel to {city}."]
PLAN_Q = [("Who is coming with me on my trip to {city}?", "both"),
          ("What am I planning to do in {city}?", "first"),
          ("Which month is my journey to {city}?", "first")]
PREFERENCES = [
    ("Every morning I start with a cup of {v}, never anything else.", "What do I drink first thing in the day?",
     ["green tea", "black coffee", "hot chocolate", "yerba mate"]),
    ("I can't stand {v}, it tastes like soap to me.", "Which food do I find disgusting?",
     ["coriander", "olives", "blue cheese", "liquorice"]),
    ("My favourite way to unwind is {v}.", "How do I like to relax?",
     ["long baths with audiobooks", "gardening on the balcony", "baking sourdough", "night walks"]),
    ("I always sit by the window on trains; aisle seats make me {v}.", "Why do I avoid aisle seats?",
     ["feel trapped", "queasy", "anxious", "restless"]),
    ("For holidays I prefer {v} over beaches.", "What kind of holiday destinations do I like?",
     ["mountain villages", "big museums", "forest cabins", "old harbour towns"]),
    ("I'm allergic to {v}, so keep that in mind for recipes.", "What am I allergic to?",
     ["peanuts", "shellfish", "sesame", "kiwi fruit"]),
    ("The music I put on while working is {v}.", "What do I listen to when I work?",
     ["baroque harpsichord", "lo-fi beats", "old bossa nova", "film soundtracks"]),
    ("My dream car would be {v}.", "Which vehicle do I fantasise about owning?",
     ["a vintage Volvo estate", "a small electric van", "a red Alfa Romeo", "a camper bus"]),
]
CHATTER = ["{name} sent me a funny video today.", "I should call {name} this week, it's been a while.",
           "The news from {city} looked grim this morning.", "{name} recommended a podcast about history.",
           "Saw a documentary about {city}; the old town looks lovely.", "{name} asked how my week was going.",
           "It rained all day, I stayed in and read.", "Work was busy, too many meetings again.",
           "I finally fixed the squeaky door.", "{name} and I argued about a film, as usual.",
           "Thinking about repainting the kitchen.", "My back hurts from sitting all day.",
           "{name} is always late for everything.", "There's a new bakery near the station.",
           "Someone at work mentioned {city} as a conference venue.", "I lost my umbrella again.",
           "{name} wants to start a book club.", "I tried a new recipe with lentils, it was fine.",
           "The train was delayed by forty minutes.", "{name} posted photos from {city}."]
AGENT = ["That sounds lovely, tell me more about {name}.", "I'll remember that.",
         "How did that make you feel?", "Good to hear from you again.", "Noted. Anything else on your mind?",
         "That must have been a long day.", "Interesting, I hadn't heard about {city} before.",
         "Would you like me to remind you about it later?"]


def generate(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(memories, questions), deterministic for `seed`."""
    rng = random.Random(seed)
    people = [{"name": n, "rel": rng.choice(RELATIONS)} for n in NAMES]
    starts = sorted(END - timedelta(minutes=rng.randint(0, 330 * 24 * 60)) for _ in range(SESSIONS))
    facts: list[tuple[str, dict]] = []
    for p in people:
        for kind in rng.sample(list(FACTS), k=rng.randint(3, 5)):
            slots = dict(p)
            job, jobline = rng.choice(JOBS)
            pet, petkind = rng.choice(PETS)
            injury, cause, hurt = rng.choice(INJURIES)
            slots.update(city=rng.choice(CITIES), job=job, jobline=jobline, pet=pet, petkind=petkind,
                         petname=rng.choice(PET_NAMES), month=rng.choice(MONTHS), day=rng.randint(1, 28),
                         age=rng.randint(20, 70), instrument=rng.choice(INSTRUMENTS), injury=injury,
                         cause=cause, hurt=hurt, restaurant=rng.choice(RESTAURANTS))
            facts.append((kind, slots))
    plan_cities = rng.sample(CITIES, 14)
    plans = [{"city": c, "month": rng.choice(MONTHS), **dict(zip(("activity", "topic"), rng.choice(ACTIVITIES),
                                                                  strict=True)), **rng.choice(people)}
             for c in plan_cities]
    prefs = [(m, q, rng.choice(vs)) for m, q, vs in PREFERENCES]

    # lay the turns out over the sessions: every fact once, chit-chat around it
    items: list[tuple[str, dict, str]] = [("fact", {"kind": k, **s}, "") for k, s in facts]
    items += [("plan1", p, "") for p in plans] + [("plan2", p, "") for p in plans]
    items += [("pref", {"m": m, "q": q, "v": v}, "") for m, q, v in prefs]
    rng.shuffle(items)
    memories: list[dict] = []
    questions: list[dict] = []
    plan_ids: dict[str, list[int]] = {}
    per_session = -(-len(items) // SESSIONS)
    for s_idx, start in enumerate(starts):
        chunk = items[s_idx * per_session:(s_idx + 1) * per_session]
        turn = 0

        def add(text: str, speaker: str, start=start, s_idx=s_idx) -> int:
            nonlocal turn
            bid = len(memories)
            memories.append({"content": text, "memory_type": "episodic",
                             "event_time": (start + timedelta(minutes=2 * turn)).isoformat(),
                             "source_tag": "external_user" if speaker == "user" else "internal_self",
                             "metadata": {"bench_id": bid, "session": s_idx + 1, "speaker": speaker}})
            turn += 1
            return bid

        for kind, slots, _ in chunk:
            for _ in range(rng.randint(3, 6)):      # chit-chat naming the same people and places
                other = rng.choice(people)
                fill = {"name": rng.choice([other["name"], slots.get("name", other["name"])]),
                        "city": rng.choice([rng.choice(CITIES), slots.get("city", "Porto")])}
                add(rng.choice(CHATTER).format(**fill), "user")
                if rng.random() < 0.5:
                    add(rng.choice(AGENT).format(**fill), "agent")
            if kind == "fact":
                mt, qt = FACTS[slots["kind"]]
                bid = add(rng.choice(mt).format(**slots), "user")
                questions.append({"question": rng.choice(qt).format(**slots), "evidence": [bid],
                                  "kind": slots["kind"]})
            elif kind == "pref":
                bid = add(slots["m"].format(v=slots["v"]), "user")
                questions.append({"question": slots["q"], "evidence": [bid], "kind": "preference"})
            else:
                text = rng.choice(PLAN_M1 if kind == "plan1" else PLAN_M2).format(**slots)
                plan_ids.setdefault(slots["city"], []).append(add(text, "user"))
    for p in plans:
        ids = sorted(plan_ids[p["city"]])
        for qt, which in PLAN_Q:
            questions.append({"question": qt.format(**p), "evidence": ids if which == "both" else ids[:1],
                              "kind": "plan"})
    for i, q in enumerate(questions):
        q["id"] = i
    return memories, questions


def main() -> None:
    memories, questions = generate()
    DATA.mkdir(parents=True, exist_ok=True)
    for path, rows in ((MEMORIES, memories), (QUESTIONS, questions)):
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(memories)} memories -> {MEMORIES}\n{len(questions)} questions -> {QUESTIONS}")


if __name__ == "__main__":
    main()
