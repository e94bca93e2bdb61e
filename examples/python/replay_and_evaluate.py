"""Notebook-style: replay a recorded policy log and evaluate retrieval on the demo mailbox.

    python examples/python/replay_and_evaluate.py [WORKDIR]

Both evaluations run in the core (steward-core::replay and ::eval); Python only reads files and
prints. The results are plain objects with typed attributes and `to_dict()`, ready for
`pandas.DataFrame([c.to_dict() for c in result.cases])`.
Exits non-zero when a labeled query finds none of its expected messages or a replayed decision
differs from the recorded one, so it doubles as a regression gate (scripts/test runs it).
"""

import pathlib
import sys
import tempfile

import steward

HERE = pathlib.Path(__file__).resolve().parent


def main(workdir: pathlib.Path) -> int:
    maildir = workdir / "demo-maildir"
    written = steward.demo_maildir(maildir, messages=300)
    s = steward.Steward(workdir / "home")
    summary = s.index_maildir(maildir, account="demo")
    print(f"mirrored {summary['added']} messages from {written['files']} files "
          f"({summary['error_count']} malformed files reported, not fatal)")

    replay = s.replay.policy((HERE / "policy-log.jsonl").read_text())
    print(f"\npolicy replay: {replay.matched}/{replay.compared} recorded decisions hold")
    for o in replay.outcomes:
        mark = "  " if o.matches is not False else "!!"
        print(f"  {mark} {o.tool:<16} {o.decision:<6} expected {o.expected}")

    result = s.eval.retrieval((HERE / "demo-queries.jsonl").read_text())
    overall = result.overall
    print(f"\nretrieval: {overall.cases} labeled queries, recall {overall.recall:.2f}, "
          f"MRR {overall.mrr:.2f}, nDCG {overall.ndcg:.2f}")
    for kind, scores in sorted(result.by_kind.items()):
        print(f"  {kind:<11} recall {scores.recall:.2f}  MRR {scores.mrr:.2f}")
    misses = [c for c in result.cases if c.recall == 0]
    for c in misses:
        print(f"  !! case {c.index} ({c.kind}) found none of its expected messages")
    return 1 if misses or replay.differences else 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(main(pathlib.Path(sys.argv[1])))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(pathlib.Path(tmp)))
