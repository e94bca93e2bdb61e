"""The UniFFI library through UniFFI's generated Python bindings (the same library the Swift
launcher links): open a home, mirror a Maildir, read counts, typed errors across the boundary.

Run by scripts/test after `uniffi-bindgen generate --library … --language python`, with the
generated module and the library on PYTHONPATH (STEWARD_FFI_PYTHON)."""

import pathlib

import pytest

import steward_ffi as ffi


def write_maildir(root: pathlib.Path) -> pathlib.Path:
    cur = root / "Maildir" / "cur"
    cur.mkdir(parents=True)
    (cur / "1:2,S").write_bytes(b"From: a@example.org\nSubject: one\nMessage-ID: <1@x>\n\nhello\n")
    (cur / "2:2,").write_bytes(
        b"From: b@example.org\nSubject: Re: one\nMessage-ID: <2@x>\nIn-Reply-To: <1@x>\n\nhi\n")
    (cur / "3:2,").write_bytes(b"")
    return root / "Maildir"


def test_open_index_and_count(tmp_path):
    assert ffi.steward_version() == "0.1.0"
    s = ffi.Steward.open(str(tmp_path / "home"))
    first = s.index_maildir(str(write_maildir(tmp_path)), "ffi")
    assert (first.added, first.error_count, first.threads) == (2, 1, 1)
    again = s.index_maildir(str(tmp_path / "Maildir"), "ffi")
    assert (again.added, again.updated) == (0, 0)
    stats = s.mirror_stats()
    assert (stats.messages_live, stats.messages_deleted, stats.error_count) == (2, 0, 1)


def test_search_finds_mirrored_mail_and_bad_queries_are_typed(tmp_path):
    s = ffi.Steward.open(str(tmp_path / "home"))
    s.index_maildir(str(write_maildir(tmp_path)), "ffi")
    page = s.search(ffi.SearchQuery(text="hello"))
    assert [h.subject for h in page.hits] == ["one"]
    assert page.hits[0].from_address == "a@example.org"
    assert page.next_offset is None
    by_sender = s.search(ffi.SearchQuery(**{"from": "b@example.org"}))
    assert [h.subject for h in by_sender.hits] == ["Re: one"]
    first = s.search(ffi.SearchQuery(sort="date", limit=1))
    assert len(first.hits) == 1 and first.next_offset == 1
    for query, code in [(ffi.SearchQuery(limit=0), "LIMIT_OUT_OF_RANGE"),
                        (ffi.SearchQuery(role="nope"), "INVALID_ROLE"),
                        (ffi.SearchQuery(after="yesterday"), "INVALID_DATE"),
                        (ffi.SearchQuery(account="nobody"), "ACCOUNT_NOT_FOUND")]:
        with pytest.raises(ffi.FfiError.Steward) as e:
            s.search(query)
        assert e.value.code == code, query


def test_errors_cross_as_kind_code_and_message(tmp_path):
    s = ffi.Steward.open(str(tmp_path / "home"))
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.index_maildir(str(tmp_path / "missing"), None)
    assert (e.value.kind, e.value.code) == ("not_found", "MAIL_SOURCE_NOT_FOUND")
    assert "missing" in e.value.message
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ffi.FfiError.Steward) as e:
        ffi.Steward.open(str(tmp_path / "file"))
    assert e.value.kind in ("invalid_input", "unavailable")


STEWARD = pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "steward"


def test_a_person_resolves_a_pending_send_and_the_journal_is_readable(tmp_path):
    import os
    import subprocess

    home = tmp_path / "home"
    body = tmp_path / "body.txt"
    body.write_text("See you at nine.\n")
    env = dict(os.environ, STEWARD_SMTP_HOST="127.0.0.1", STEWARD_SMTP_PORT="9",
               STEWARD_SMTP_SECURITY="plain", STEWARD_MAIL_FROM="ada@example.org",
               STEWARD_MAIL_ACCOUNT="me")
    # Without --yes the command leaves a pending request (nothing is sent).
    subprocess.run([STEWARD, "--home", home, "mail", "send", "--to", "bob@example.org",
                    "--subject", "Nine", "--body-file", body, "--as", "ada"],
                   check=True, capture_output=True, env=env)
    s = ffi.Steward.open(str(home))
    [card] = s.approvals(True, 0, 10)
    assert (card.tool, card.level, card.status) == ("mail.send", "confirm", "requested")
    assert '"subject":"Nine"' in card.input_json
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.human("agent:helper")
    assert e.value.code == "APPROVAL_BAD_PERSON"
    ada = s.human("ada")
    denied = ada.deny(card.id, "not now")
    assert denied.status == "denied"
    with pytest.raises(ffi.FfiError.Steward) as e:
        ada.approve(card.id, None, None)
    assert (e.value.kind, e.value.code) == ("conflict", "APPROVAL_ALREADY_RESOLVED")
    assert s.approvals(True, 0, 10) == []
    assert s.write_operations(None, 0, 10) == []
    with pytest.raises(ffi.FfiError.Steward) as e:
        s.write_operations("sent", 0, 10)
    assert e.value.code == "JOURNAL_INVALID"
