"""Backups through the Python binding: create, verify, restore, typed errors, secrets left out."""

import os
import pathlib

import pytest

import steward


def write_maildir(root: pathlib.Path) -> pathlib.Path:
    cur = root / "Maildir" / "cur"
    cur.mkdir(parents=True)
    (cur / "1:2,S").write_bytes(
        b"From: a@example.org\nSubject: invoice one\nMessage-ID: <1@x>\n\nhello\n"
    )
    (cur / "2:2,").write_bytes(
        b"From: b@example.org\nSubject: Re: invoice one\nMessage-ID: <2@x>\n"
        b"In-Reply-To: <1@x>\n\nhi\n"
    )
    return root / "Maildir"


def files_under(root: pathlib.Path) -> list[pathlib.Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_backup_verify_and_restore_into_a_new_home(tmp_path):
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path), account="py")
    m = s.backup_create(tmp_path / "backup")
    assert m["format"] == 1 and m["secrets_included"] is False
    files = {f["path"]: f for f in m["files"]}
    assert files["mirror.db"]["kind"] == "store" and files["mirror.db"]["user_version"] >= 1
    assert not any(p.startswith("index") for p in files)
    assert len(files["mirror.db"]["sha256"]) == 64
    assert steward.Steward.backup_verify(tmp_path / "backup") == m

    r = steward.Steward.backup_restore(tmp_path / "backup", tmp_path / "restored")
    assert r["files"] == len(m["files"]) and "mirror.db" in r["stores"]
    assert r["secrets_restored"] is False
    restored = steward.Steward(tmp_path / "restored")
    assert restored.mirror_stats() == s.mirror_stats()
    # The text index was not restored; it is rebuilt on first use.
    page = restored.search(text="invoice", limit=10)
    assert len(page["messages"]) >= 1


def test_a_flipped_byte_and_occupied_targets_are_typed_errors(tmp_path):
    s = steward.Steward(tmp_path / "home")
    s.index_maildir(write_maildir(tmp_path), account="py")
    backup = tmp_path / "backup"
    s.backup_create(backup)
    with pytest.raises(steward.ConflictError) as e:
        s.backup_create(backup)
    assert e.value.code == "BACKUP_TARGET_EXISTS"

    db = backup / "mirror.db"
    data = bytearray(db.read_bytes())
    data[len(data) // 2] ^= 0x01
    db.write_bytes(bytes(data))
    with pytest.raises(steward.CorruptError) as e:
        steward.Steward.backup_verify(backup)
    assert e.value.code == "BACKUP_MISMATCH" and e.value.kind == "corrupt"
    assert "mirror.db (changed)" in str(e.value)

    with pytest.raises(steward.ConflictError) as e:
        steward.Steward.backup_restore(backup, tmp_path / "home")
    assert e.value.code == "BACKUP_TARGET_NOT_EMPTY"
    with pytest.raises(steward.NotFoundError) as e:
        steward.Steward.backup_verify(tmp_path / "not-a-backup")
    assert e.value.code == "BACKUP_MANIFEST_MISSING"


def test_secrets_stay_out_unless_included(tmp_path):
    home = tmp_path / "home"
    s = steward.Steward(home)
    (home / "config.toml").write_text(
        '[llm.targets.main]\nbase_url = "https://llm.example.com/v1"\nmodel = "big"\n'
        'api_key = "sk-py-Zq93"\n'
    )
    token = "T0ken" * 8
    (home / "auth-token").write_text(token)
    os.chmod(home / "auth-token", 0o600)

    m = s.backup_create(tmp_path / "plain")
    assert m["stripped_keys"] == ["llm.targets.main.api_key"]
    assert "auth-token" in [o["path"] for o in m["omitted"]]
    for f in files_under(tmp_path / "plain"):
        data = f.read_bytes()
        assert b"Zq93" not in data and token.encode() not in data, f

    m = s.backup_create(tmp_path / "full", include_secrets=True)
    assert m["secrets_included"] is True and m["stripped_keys"] == []
    assert (tmp_path / "full" / "auth-token").read_text() == token
    assert "sk-py-Zq93" in (tmp_path / "full" / "config.toml").read_text()
    assert {f["path"]: f["kind"] for f in m["files"]}["auth-token"] == "secret"
