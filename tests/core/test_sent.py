"""The digest of a request as sent (``"sent"`` on a line): written only when
recording redacted nothing from the request, and a replay that finds it
answers with the recording keying would have chosen."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from reel_core import (
    Cassette,
    CassetteMeta,
    Config,
    Engine,
    Forward,
    MatchConfig,
    MatchMode,
    Miss,
    Mode,
    Redactor,
    Replay,
    Request,
)
from reel_core._interaction import RecordedRequest
from reel_core._sent import SENT_AT, sent_digest
from reel_core.tools import read_line, record_exchange
from tests.replaying import without_sent

from ._helpers import interaction, pull

KEY = "sk-proj-" + "A1" * 20
BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
JSON = (b"content-type", b"application/json")
HOST = (b"host", b"api.openai.com")
AUTH = (b"authorization", b"Bearer " + KEY.encode())


def _req(
    body: bytes = BODY,
    target: str = "/v1/chat/completions",
    headers: tuple[tuple[bytes, bytes], ...] = (HOST, JSON, AUTH),
    method: str = "POST",
) -> Request:
    return Request(method, target, headers, body)


def _record(cassette: Cassette, req: Request, config: Config | None = None) -> bytes:
    """Record ``req`` (answered ``{"ok":1}``) into ``cassette``: its line."""
    engine = Engine(cassette, config or Config(mode=Mode.RECORD))
    engine.receive_request(req)
    events, _ = pull(engine)
    assert isinstance(events[0], Forward)
    engine.upstream_head(200, [JSON], mono=0.0, wall=1_700_000_000.0)
    engine.upstream_data(b'{"ok":1}', mono=0.0)
    engine.upstream_end(mono=0.0)
    pull(engine)
    recorded = engine.record()
    assert recorded is not None
    return recorded.line


def _recorded(
    *reqs: Request, config: Config | None = None, meta: CassetteMeta | None = None
) -> bytes:
    """A cassette file recording ``reqs`` in turn."""
    cassette = Cassette(meta=meta)
    for req in reqs:
        _record(cassette, req, config)
    return cassette.dumps()


def _play(data: bytes, req: Request, config: Config | None = None, now: float | None = None) -> Any:
    engine = Engine(Cassette.loads(data, name="t.jsonl"), config or Config())
    engine.receive_request(req, wall=now)
    return pull(engine)[0][0]


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()[1:]]


class _Source:
    """Lines kept in a source that is no bytes (as a file read again for a
    line is): what ``Cassette.load_pieces`` asks of one."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __getitem__(self, index: slice) -> bytes:
        return self.data[index]

    def __len__(self) -> int:
        return len(self.data)

    def find(self, sub: bytes, start: int, end: int) -> int:
        return self.data.find(sub, start, end)

    def startswith(self, prefix: bytes, start: int, end: int) -> bool:
        return self.data.startswith(prefix, start, end)


@contextmanager
def no_keying() -> Iterator[None]:
    """Keying a request in full fails the test."""

    def keyed(self: RecordedRequest, config: MatchConfig) -> str:
        raise AssertionError("keyed in full")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RecordedRequest, "key", keyed)
        yield


def test_a_clean_request_carries_its_digest_right_after_its_key() -> None:
    line = _record(Cassette(), _req())
    obj = json.loads(line)
    assert obj["sent"] == sent_digest(_req(), Redactor.from_settings({}))
    assert line.startswith(b'{"key":"' + obj["key"].encode() + b'","sent":"')
    assert line.index(b',"sent":"') == SENT_AT


def test_the_digest_covers_method_target_body_and_the_keyed_headers() -> None:
    base = Redactor.from_settings({})
    digests = {
        sent_digest(r, base)
        for r in (
            _req(),
            _req(method="PUT"),
            _req(target="/v1/chat/completions?x=1"),
            _req(body=BODY + b" "),
            _req(headers=(HOST, (b"content-type", b"text/plain"))),
            _req(headers=(HOST, JSON, (b"content-encoding", b"identity"))),
        )
    }
    assert len(digests) == 6
    # the credential and host headers are not keyed: the same digest
    assert sent_digest(_req(headers=(JSON,)), base) == sent_digest(_req(), base)
    # another redaction rule set: another digest
    assert sent_digest(_req(), Redactor(pii=False)) != sent_digest(_req(), base)


def test_a_replay_finds_the_key_by_the_digest() -> None:
    data = _recorded(_req())
    with no_keying():
        decision = _play(data, _req(headers=(JSON, (b"authorization", b"Bearer other-1234567890"))))
    assert isinstance(decision, Replay)
    assert decision.key == _lines(data)[0]["key"]


def test_the_digest_path_and_full_keying_agree() -> None:
    data = _recorded(_req())
    by_digest = _play(data, _req())
    in_full = _play(without_sent(data), _req())
    assert isinstance(by_digest, Replay)
    assert isinstance(in_full, Replay)
    assert (by_digest.key, by_digest.interaction_id) == (in_full.key, in_full.interaction_id)


@pytest.mark.parametrize(
    ("body", "target"),
    [
        (b'{"messages":[{"content":"my key is ' + KEY.encode() + b'"}]}', "/v1/chat/completions"),
        (b'{"messages":[{"content":"mail me at ann@example.com"}]}', "/v1/chat/completions"),
        (BODY, "/v1/chat/completions?api_key=abc"),
        (BODY, "/v1/models/" + KEY),
    ],
)
def test_a_request_with_a_secret_carries_no_digest(body: bytes, target: str) -> None:
    req = _req(body=body, target=target)
    data = _recorded(req)
    assert "sent" not in _lines(data)[0]
    digest = sent_digest(req, Redactor.from_settings({}))
    assert digest.encode() not in data
    assert hashlib.sha256(body).hexdigest().encode() not in data
    assert isinstance(_play(data, req), Replay)  # keyed in full, as before


def test_a_body_holding_the_requests_own_credential_carries_no_digest() -> None:
    token = b"tok_" + b"x" * 30  # no secret shape: only the header says it is one
    req = _req(body=b'{"content":"' + token + b'"}', headers=(JSON, (b"x-api-key", token)))
    data = _recorded(req)
    assert "sent" not in _lines(data)[0]
    assert token not in data


def test_a_replayed_requests_credential_in_its_body_is_keyed_in_full() -> None:
    """Recorded with one credential, the body clean; replayed with a
    credential the body holds: keying scrubs it, so the digest must not
    answer."""
    token = b"tok_" + b"y" * 30
    body = b'{"content":"' + token + b'"}'
    data = _recorded(_req(body=body))
    assert "sent" in _lines(data)[0]
    replayed = _req(body=body, headers=(JSON, (b"x-api-key", token)))
    by_digest = _play(data, replayed)
    in_full = _play(without_sent(data), replayed)
    assert isinstance(in_full, Miss)
    assert isinstance(by_digest, Miss)
    assert by_digest.report.key == in_full.report.key


def test_other_redaction_rules_ignore_the_digest() -> None:
    """Recorded with PII kept, an e-mail stays in the line (and a digest is
    written); replayed with PII redacted, keying scrubs it: a miss, with or
    without the digest."""
    req = _req(body=b'{"content":"ann@example.com"}')
    data = _recorded(req, config=Config(mode=Mode.RECORD, pii=False))
    assert "sent" in _lines(data)[0]
    assert isinstance(_play(data, req), Miss)
    assert isinstance(_play(without_sent(data), req), Miss)
    assert isinstance(_play(data, req, Config(pii=False)), Replay)


def test_a_retried_request_gets_each_recording_in_turn() -> None:
    cassette = Cassette()
    for n in (1, 2):
        engine = Engine(cassette, Config(mode=Mode.RECORD))
        engine.receive_request(_req())
        pull(engine)
        engine.upstream_head(200, [JSON], mono=0.0)
        engine.upstream_data(b'{"n":%d}' % n, mono=0.0)
        engine.upstream_end(mono=0.0)
        pull(engine)
        engine.record()
    data = cassette.dumps()
    lines = _lines(data)
    assert lines[0]["sent"] == lines[1]["sent"]
    engine = Engine(Cassette.loads(data), Config(repeat=False))
    ids = []
    for _ in range(3):
        engine.receive_request(_req())
        with no_keying():
            events, _ = pull(engine)
        ids.append(events[0].interaction_id if isinstance(events[0], Replay) else "miss")
        engine.start_next_cycle()
    assert ids == [lines[0]["id"], lines[1]["id"], "miss"]


def test_a_gzip_body_carries_no_digest_and_still_replays() -> None:
    raw = gzip.compress(BODY)
    req = _req(body=raw, headers=(JSON, (b"content-encoding", b"gzip")))
    data = _recorded(req)
    assert "sent" not in _lines(data)[0]
    assert isinstance(_play(data, req), Replay)
    # the same body sent plain: its digest is not the gzip one, keyed in full
    assert isinstance(_play(data, _req()), Replay)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (b"application/x-www-form-urlencoded", b"model=m&prompt=hi"),
        (
            b"multipart/form-data; boundary=XyZ",
            b'--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--XyZ--\r\n',
        ),
    ],
)
def test_a_form_body_carries_no_digest_and_still_replays(content_type: bytes, body: bytes) -> None:
    req = _req(body=body, headers=(HOST, (b"content-type", content_type)))
    data = _recorded(req)
    assert "sent" not in _lines(data)[0]
    assert isinstance(_play(data, req), Replay)


def test_non_default_match_settings_write_and_read_no_digest() -> None:
    ignore = MatchConfig(MatchMode.IGNORE_FIELDS, ("temperature",))
    data = _recorded(_req(), config=Config(mode=Mode.RECORD, match=ignore))
    assert "sent" not in _lines(data)[0]
    # a cassette with digests played under other settings is keyed in full
    with_digest = _recorded(_req())
    with no_keying(), pytest.raises(AssertionError, match="keyed in full"):
        _play(with_digest, _req(), Config(match=ignore))


def test_a_cassette_of_other_match_settings_writes_no_digest() -> None:
    meta = CassetteMeta(match=MatchConfig(MatchMode.IGNORE_FIELDS, ("temperature",)))
    data = _recorded(_req(), meta=meta)
    assert "sent" not in _lines(data)[0]
    assert isinstance(_play(data, _req()), Replay)


def test_a_cassette_written_before_the_digest_still_replays() -> None:
    data = without_sent(_recorded(_req()))
    assert b'"sent"' not in data
    assert isinstance(_play(data, _req()), Replay)


def test_a_digest_claimed_by_two_keys_says_nothing() -> None:
    """A hand edit: two lines of different keys carry one digest.  Neither
    is trusted; the request is keyed in full."""
    data = _recorded(_req())
    other = interaction(body=b'{"model":"other"}', id="other")
    digest = _lines(data)[0]["sent"]
    edited = other.to_line().replace(b'"id":', b'"sent":"' + digest.encode() + b'","id":', 1)
    cassette = Cassette.loads(data + edited)
    assert cassette.sent_key(digest) is None
    assert isinstance(_play(data + edited, _req()), Replay)


def test_a_bad_digest_is_a_bad_line() -> None:
    line = interaction().to_line().replace(b'"id":', b'"sent":"XYZ","id":', 1)
    with pytest.raises(ValueError, match='"sent" must be 64 lowercase hex'):
        read_line(line)


def test_lines_read_again_from_their_file_give_their_digests() -> None:
    """A cassette whose lines stay in a source that is no bytes (a file
    read again for a line): the digests are read line by line."""
    form = _req(body=b"a=1", headers=((b"content-type", b"application/x-www-form-urlencoded"),))
    data = _recorded(_req(), form, _req(body=b'{"model":"two"}'))

    cassette = Cassette.load_pieces([(0, data)], _Source(data))
    sent = [line for line in _lines(data) if "sent" in line]
    assert len(sent) == 2  # not the form's
    for line in sent:
        assert cassette.sent_key(line["sent"]) == line["key"]


def test_a_recording_added_after_open_is_found_by_its_digest() -> None:
    cassette = Cassette.loads(_recorded(_req()))
    assert cassette.sent_key("0" * 64) is None  # the lines read
    line = _record(cassette, _req(body=b'{"model":"new"}'))
    obj = json.loads(line)
    assert cassette.sent_key(obj["sent"]) == obj["key"]
    cassette.clear()
    assert cassette.sent_key(obj["sent"]) is None


def test_a_parsed_line_gives_its_digest() -> None:
    """A line not in Reel's own layout (reformatted) is parsed at open: its
    digest is filed from the parsed line."""
    data = _recorded(_req())
    obj = _lines(data)[0]
    pretty = json.dumps(obj, indent=None, separators=(", ", ": ")).encode() + b"\n"
    cassette = Cassette.loads(pretty)
    assert cassette.sent_key(obj["sent"]) == obj["key"]


def test_staleness_is_judged_on_the_digest_path() -> None:
    data = _recorded(_req())  # ts 2023-11-14
    decision = _play(data, _req(), Config(max_age=60.0), now=1_800_000_000.0)
    assert isinstance(decision, Replay)
    assert decision.stale is not None


def test_a_rerecorded_generation_is_the_one_the_digest_finds() -> None:
    """Auto mode with a max_age: the stale recording is recorded again as
    the next generation; the digest (on both lines) finds the key, and the
    newest generation answers."""
    cassette = Cassette.loads(_recorded(_req()))
    config = Config(mode=Mode.AUTO, max_age=60.0)
    engine = Engine(cassette, config)
    engine.receive_request(_req(), wall=1_800_000_000.0)
    events, _ = pull(engine)
    assert isinstance(events[0], Forward)
    engine.upstream_head(200, [JSON], mono=0.0, wall=1_800_000_000.0)
    engine.upstream_data(b'{"new":1}', mono=0.0)
    engine.upstream_end(mono=0.0)
    pull(engine)
    assert engine.record() is not None
    data = cassette.dumps()
    lines = _lines(data)
    assert lines[0]["sent"] == lines[1]["sent"]
    assert lines[1]["gen"] == 1
    decision = _play(data, _req(), Config(max_age=60.0), now=1_800_000_001.0)
    assert isinstance(decision, Replay)
    assert decision.interaction_id == lines[1]["id"]
    assert decision.stale is None


def test_redacting_a_line_drops_its_digest() -> None:
    line = _record(Cassette(), _req())
    parsed = Cassette.loads(line).interactions()[0]
    assert parsed.sent is not None
    stricter = Redactor(extra_patterns={"model": r"\bm\b"})
    redacted = parsed.redacted(stricter, MatchConfig().keying())
    assert redacted.sent is None
    assert b'"sent"' not in redacted.to_line()
    assert parsed.redacted(Redactor(), MatchConfig().keying()) is parsed  # nothing found: kept


def test_an_imported_exchange_carries_no_digest() -> None:
    imported = record_exchange(_req(), 200, [JSON], b'{"ok":1}', redactor=Redactor())
    assert imported.sent is None
    assert b'"sent"' not in imported.to_line()


def test_a_source_that_cannot_give_its_lines_back_gives_no_digests() -> None:
    """The file changed since it was opened: no digest is read from it, and
    the request is keyed in full (the line itself then reads as bad)."""
    data = _recorded(_req())

    class Changed(_Source):
        def __getitem__(self, index: slice) -> bytes:
            raise ValueError("the file changed since it was opened")

    cassette = Cassette.load_pieces([(0, data)], Changed(data))
    assert cassette.sent_key(_lines(data)[0]["sent"]) is None


def test_a_redactor_class_of_its_own_is_other_rules() -> None:
    class Lax(Redactor):
        """Redacts nothing (a redactor given in code)."""

        def keeps(self, *texts: str | bytes) -> bool:
            return True

    assert sent_digest(_req(), Lax()) != sent_digest(_req(), Redactor())
