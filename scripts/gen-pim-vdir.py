#!/usr/bin/env python3
"""Generates a calendar vdir and an address book vdir for benchmarks (stdlib only, seeded):
`gen-pim-vdir.py DIR EVENTS CARDS`. DIR/cal holds two collections (work, home) of one `.ics`
item per event, 30% of them recurring (weekly, daily with COUNT, monthly, yearly; some with
UNTIL, some forever), times in Europe/Rome over the two years around today; DIR/contacts holds
two books of one `.vcf` card per person, a fifth of them sharing an address with a card of the
other book. Re-running with the same arguments writes the same files."""

import datetime as dt
import random
import sys
from pathlib import Path

WORDS = ("riunione budget progetto cliente dentista palestra cena pranzo call review "
         "standup planning fattura condominio scuola viaggio treno volo medico banca "
         "assicurazione avvocato architetto cantiere consegna workshop").split()
NAMES = ("Anna Marco Giulia Luca Sofia Paolo Chiara Elena Francesca Tom James Priya Sara "
         "Davide Matteo Giorgio Laura Valentina Alessandro Martina").split()
FAMILY = ("Rossi Bianchi Verdi Ferrari Esposito Romano Colombo Ricci Marino Greco Bruno "
          "Gallo Conti Costa Giordano Mancini Rizzo Lombardi Moretti Barbieri").split()


def main():
    root, events, cards = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rnd = random.Random(4242)
    today = dt.date.today()
    for coll in ("work", "home"):
        d = root / "cal" / coll
        d.mkdir(parents=True, exist_ok=True)
        (d / "displayname").write_text(coll.capitalize())
    for i in range(events):
        coll = "work" if i % 3 else "home"
        day = today + dt.timedelta(days=rnd.randint(-365, 365))
        hour, minute = rnd.randint(7, 20), rnd.choice((0, 15, 30, 45))
        start = f"{day:%Y%m%d}T{hour:02d}{minute:02d}00"
        rule = ""
        if rnd.random() < 0.30:
            kind = rnd.random()
            if kind < 0.5:
                rule = "RRULE:FREQ=WEEKLY"
                if rnd.random() < 0.5:
                    until = day + dt.timedelta(days=rnd.randint(30, 400))
                    rule += f";UNTIL={until:%Y%m%d}T235959Z"
            elif kind < 0.7:
                rule = f"RRULE:FREQ=DAILY;COUNT={rnd.randint(2, 30)}"
            elif kind < 0.9:
                rule = "RRULE:FREQ=MONTHLY"
            else:
                rule = "RRULE:FREQ=YEARLY"
            rule += "\r\n"
        summary = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4))).capitalize()
        who = f"{rnd.choice(NAMES)} {rnd.choice(FAMILY)}"
        mail = who.lower().replace(" ", ".") + "@example.org"
        text = (
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//steward bench//EN\r\nBEGIN:VEVENT\r\n"
            f"UID:bench-{i}@steward\r\nDTSTAMP:20250101T000000Z\r\n"
            f"DTSTART;TZID=Europe/Rome:{start}\r\nDURATION:PT{rnd.choice((30, 45, 60, 90))}M\r\n"
            f"{rule}SUMMARY:{summary}\r\nLOCATION:Sala {rnd.randint(1, 40)}\r\n"
            f"ATTENDEE;CN={who}:mailto:{mail}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        )
        (root / "cal" / coll / f"bench-{i}.ics").write_text(text)
    for book in ("work", "home"):
        (root / "contacts" / book).mkdir(parents=True, exist_ok=True)
    prev = None
    for i in range(cards):
        given, family = rnd.choice(NAMES), rnd.choice(FAMILY)
        book = "work" if i % 2 else "home"
        addr = f"{given}.{family}.{i}@example.org".lower()
        if i % 5 == 1 and prev:
            # The same person in the other book: merged by address.
            given, family, addr = prev
        prev = (given, family, addr)
        text = (
            f"BEGIN:VCARD\r\nVERSION:3.0\r\nUID:card-{i}\r\nFN:{given} {family}\r\n"
            f"N:{family};{given};;;\r\nEMAIL:{addr}\r\nTEL:0{rnd.randint(2, 9)} {rnd.randint(1000, 9999)} "
            f"{rnd.randint(1000, 9999)}\r\nORG:{rnd.choice(WORDS).capitalize()} srl\r\nEND:VCARD\r\n"
        )
        (root / "contacts" / book / f"card-{i}.vcf").write_text(text)


main()
