"""Files and documents from Python: the shared folder walked and its documents indexed, a
file found by name, a document read window by window to its end, searched inside and across
documents, and paths outside the folder or naming a secret refused by code."""

import pytest

import steward


def test_files_and_documents(tmp_path):
    share = tmp_path / "share"
    (share / "contracts").mkdir(parents=True)
    words = " ".join(f"clause{i}" for i in range(3000))
    (share / "contracts" / "lease.md").write_text(
        "# Lease\n\nThe notice period is three months.\n\n" + words + "\n"
    )
    (share / "contracts" / "offer.html").write_text(
        "<html><head><title>Offer</title><script>evil()</script></head>"
        "<body><p>Salary and notice terms</p></body></html>"
    )
    (share / ".env").write_text("TOKEN=secret\n")
    (tmp_path / "outside.txt").write_text("private\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[files]\nroots = ["{share}"]\n')
    s = steward.Steward(home)

    r = s.index_files()
    assert r["files"]["files"] == 2
    assert (r["documents"]["documents"], r["documents"]["indexed"]) == (2, 2)
    assert s.index_files()["documents"]["unchanged"] == 2

    page = s.find_files(name="lease")
    assert [f["path"].endswith("lease.md") for f in page["files"]] == [True]

    lease = share / "contracts" / "lease.md"
    info = s.doc_info(lease)
    assert (info["kind"], info["title"], info["has_text"]) == ("markdown", "Lease", True)
    text, cursor, windows = "", None, 0
    while True:
        w = s.read_doc(lease, cursor=cursor, chars=2000)
        assert len(w["text"]) <= 2000
        text += w["text"]
        windows += 1
        cursor = w["next_cursor"]
        if cursor is None:
            break
    assert windows > 5 and "clause2999" in text and "notice period" in text

    hits = s.search_docs("notice", path=lease)
    assert len(hits) == 1 and "notice period" in hits[0]["snippet"]
    across = s.search_docs("notice terms", limit=10)
    assert {h["path"].rsplit("/", 1)[1] for h in across} == {"lease.md", "offer.html"}
    assert all("evil" not in h["snippet"] for h in across)
    assert s.search_docs("zyzzyva") == []

    with pytest.raises(steward.DeniedError) as e:
        s.doc_info(tmp_path / "outside.txt")
    assert e.value.code == "PATH_OUTSIDE_ROOTS"
    with pytest.raises(steward.DeniedError) as e:
        s.read_doc(share / ".env")
    assert e.value.code == "PATH_SENSITIVE"
