#!/usr/bin/env python3
"""Builds a truth-benchmark split (../../../../shared/bench/truth format) from the
hand-written swap messages in swaps_a.jsonl or swaps_b.jsonl.

Each conversation gives four users' facts (four slots) in a first session, in plain
sentences, and weeks later the hand-written messages: a change naming the old and the new
value ("swap", "swap_lower"), the value restated ("restate"), or two values of the slot
that are not the user's change ("other": someone else's, a question, a plan). The
questions ask what is true now: the new value after a swap, the first value otherwise.
Only the setup sentences are templates; what is measured is how the hand-written
messages are read.

    python3 bench/topics/spans/swaps_truth.py bench/topics/spans/swaps_a.jsonl > /tmp/swaps_a_truth.json

Standard library only, deterministic.
"""
import json
import sys

SETUP = {
    "city": ("I live in {}.", "Where does the user live now?"),
    "employer": ("I work at {}.", "Which company does the user work for?"),
    "job_title": ("I work as a {}.", "What is the user's job title?"),
    "manager": ("My manager is {}.", "Who is the user's manager?"),
    "partner": ("My partner is {}.", "Who is the user's partner?"),
    "pet": ("My pet is called {}.", "What is the user's pet called?"),
    "prog_language": ("I mostly program in {}.", "Which programming language does the user use most?"),
    "database": ("Our project's database is {}.", "Which database does the user's project use?"),
    "cloud": ("Our project is hosted on {}.", "Where is the user's project hosted?"),
    "editor": ("My code editor is {}.", "Which code editor does the user use?"),
    "diet": ("My diet is {}.", "What diet does the user follow?"),
    "food": ("My favourite food is {}.", "What is the user's favourite food?"),
    "nickname": ("Please call me {}.", "What does the user want to be called?"),
    "hobbies": ("My hobby is {}.", "What are the user's hobbies?"),
    "spoken_languages": ("I speak {}.", "Which languages does the user speak?"),
    "allergies": ("I'm allergic to {}.", "What is the user allergic to?"),
}
MULTI = {"hobbies", "spoken_languages", "allergies"}
# The first value of an "other" row's user: named in no message.
DEFAULT = {
    "city": "Trondheim", "employer": "Quorvex", "job_title": "data analyst", "manager": "Ottilie",
    "partner": "Severin", "pet": "Biscotti", "prog_language": "Elixir", "database": "SQLite",
    "cloud": "Linode", "editor": "Kakoune", "diet": "flexitarian", "food": "pierogi",
    "nickname": "Wren", "hobbies": "archery", "spoken_languages": "Finnish", "allergies": "sesame",
}
USERS = ["Ada Moreau", "Bela Varga", "Chidi Obi", "Dana Kerr", "Emil Sato", "Fenna Smit", "Gus Lind", "Hana Ito"]


def main(path):
    rows = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    # Four rows of four different slots per conversation, in file order.
    pending, groups = [], []
    for r in rows:
        pending.append(r)
        picked, rest, seen = [], [], set()
        for p in pending:
            (rest if p["slot"] in seen or len(picked) == 4 else picked).append(p)
            if p not in rest:
                seen.add(p["slot"])
        if len(picked) == 4:
            groups.append(picked)
            pending = rest
    if pending:
        groups.append(pending)
    conversations = []
    for n, group in enumerate(groups):
        user = USERS[n % len(USERS)]
        s1, s2 = "2024-03-0%dT09:00:00" % (1 + n % 9), "2024-05-1%dT18:00:00" % (n % 9)
        turns, truth = [], []

        def say(session, start, role, text):
            # A minute a turn.
            time = start[:-5] + "%02d:00" % len(turns)
            turns.append({"id": "s%d:%d" % (session, len(turns) + 1), "session": session, "time": time,
                          "role": role, "speaker": user if role == "user" else "assistant", "text": text})

        for r in group:
            first = r["old"] or r["value"] or DEFAULT[r["slot"]]
            say(1, s1, "user", SETUP[r["slot"]][0].format(first))
            say(1, s1, "assistant", "Noted.")
        for r in group:
            say(2, s2, "user", r["text"])
            say(2, s2, "assistant", "Thanks for telling me.")
            first = r["old"] or r["value"] or DEFAULT[r["slot"]]
            changed = r["kind"] in ("swap", "swap_lower")
            current = r["value"] if changed else first
            truth.append({
                "slot": r["slot"], "question": SETUP[r["slot"]][1], "current": [current], "current_groups": [[current]],
                "stale": [r["old"]] if changed else [], "kind": "multi" if r["slot"] in MULTI else "single",
                "changed": changed, "evidence_turn_ids": [], "history": [], "message_kind": r["kind"],
            })
        conversations.append({"id": "swaps-%03d" % n, "user": user,
                              "sessions": [{"session": 1, "start": s1}, {"session": 2, "start": s2}],
                              "turns": turns, "truth": truth, "features": {}})
    json.dump({"benchmark": "truth", "version": 1, "split": "swaps", "seed": 0, "conversations": conversations},
              sys.stdout, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
