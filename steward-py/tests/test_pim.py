"""Calendars and contacts from Python: a vdir indexed, its agenda across a DST change,
free/busy, event search, and an address book asked who is meant (never a guess)."""

import pytest

import steward

WEEKLY = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:w@t\r\n"
    "DTSTART;TZID=Europe/Rome:20250324T090000\r\nDURATION:PT1H\r\nRRULE:FREQ=WEEKLY;COUNT=3\r\n"
    "SUMMARY:Riunione budget\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def card(uid, body):
    return f"BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\n{body}END:VCARD\r\n"


def test_calendars_and_contacts(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[calendar]\ntime_zone = "Europe/Rome"\n')
    cal = tmp_path / "cal" / "work"
    cal.mkdir(parents=True)
    (cal / "weekly.ics").write_text(WEEKLY)
    s = steward.Steward(home)
    r = s.index_calendar(vdir=tmp_path / "cal", account="me")
    assert (r["report"]["added"], r["report"]["events"]) == (1, 1)
    assert s.index_calendar(vdir=tmp_path / "cal", account="me")["report"]["unchanged"] == 1
    starts = [o["start"] for o in s.agenda("2025-03-20", "2025-04-20")]
    assert starts == [
        "2025-03-24T09:00:00+01:00",
        "2025-03-31T09:00:00+02:00",
        "2025-04-07T09:00:00+02:00",
    ]
    fb = s.free_busy("2025-03-24", "2025-03-25", min_minutes=60)
    assert [(f["start"], f["end"]) for f in fb["free"]] == [
        ("2025-03-24T10:00:00+01:00", "2025-03-24T18:00:00+01:00")
    ]
    hits = s.search_events("budget", from_="2025-03-01", to="2025-05-01")
    assert len(hits) == 1 and hits[0]["more_occurrences"] == 2
    assert s.search_events("holiday", from_="2025-03-01", to="2025-05-01") == []
    with pytest.raises(steward.InvalidInputError) as e:
        s.agenda("2025-01-01", "2026-06-01")
    assert e.value.code == "CALENDAR_BAD_WINDOW"

    book = tmp_path / "book"
    book.mkdir()
    (book / "a.vcf").write_text(
        card("a", "FN:Anna Rossi\r\nORG:Polimi\r\nEMAIL:anna@polimi.it\r\nTEL:02 1234 5678\r\n")
    )
    (book / "b.vcf").write_text(card("b", "FN:Anna Bianchi\r\nEMAIL:anna.b@example.org\r\n"))
    r = s.index_contacts(vdir=book, region="IT")
    assert r["report"]["contacts"] == 2
    assert s.search_contacts("polimi")[0]["phones"] == ["+390212345678"]
    assert s.resolve_recipient("Anna")["status"] == "ambiguous"
    found = s.resolve_recipient("Anna from Polimi")
    assert found["status"] == "resolved"
    assert found["candidates"][0]["email"] == "anna@polimi.it"
    with pytest.raises(steward.InvalidInputError) as e:
        s.index_contacts(vcf=tmp_path / "missing.vcf")
    assert e.value.code == "CONTACTS_SOURCE_UNREADABLE"
    assert len(s.contacts()) == 2, "a source that cannot be read changes nothing"
