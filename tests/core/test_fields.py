"""Header fields as each protocol carries them (``reel_core._fields``).

The invariant (docs/reliability.md, "A header value the peer may send
reaches the client as it was sent"): a header block received over HTTP/2
is refused exactly when h2's own validation refuses it for any reason but
a value that starts or ends with a space or a tab; a value any protocol
allows goes back out over HTTP/2 byte for byte, and over HTTP/1.1 as an
HTTP/1.1 reader reads it; a NUL, CR or LF never goes out."""

from __future__ import annotations

import h2.exceptions
import h2.utilities
import h11
import pytest
from bench._common import best_of
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reel_core import LocalProtocolError, RemoteProtocolError
from reel_core._fields import HeaderBlock, check_received, h2_sent, h11_sent

# -- the family ----------------------------------------------------------------

#: Bytes a value may hold anywhere but NUL, CR, LF, and the two marker
#: bytes the oracle below stands for a surrounding space or tab.
_INNER = st.sampled_from([b for b in range(256) if b not in (0, 1, 2, 10, 13)])
_PAD = st.sampled_from([b" ", b"\t"])


@st.composite
def values(draw: st.DrawFn) -> bytes:
    """A field value HTTP/2 carries: spaces or tabs around it or not,
    inside it or not, empty, percent-encoded text, any byte but NUL/CR/LF."""
    shape = draw(st.sampled_from(["bytes", "text", "percent", "empty", "pads"]))
    if shape == "empty":
        core = b""
    elif shape == "pads":
        return b"".join(draw(st.lists(_PAD, min_size=1, max_size=3)))
    elif shape == "text":
        text = draw(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12))
        core = text.encode()
    elif shape == "percent":  # gRPC's Percent-Encoded grammar: a space stays a space
        words = draw(st.lists(st.sampled_from(["no", "more", "%25", "%E2%9C%93", " "]), max_size=5))
        core = "".join(words).encode()
    else:
        core = bytes(draw(st.lists(_INNER, max_size=12)))
    lead = b"".join(draw(st.lists(_PAD, max_size=2)))
    trail = b"".join(draw(st.lists(_PAD, max_size=2)))
    return lead + core + trail


@st.composite
def illegal_values(draw: st.DrawFn) -> bytes:
    """A value with a NUL, CR or LF somewhere: never taken, never sent."""
    value = draw(values())
    at = draw(st.integers(0, len(value)))
    return value[:at] + draw(st.sampled_from([b"\x00", b"\r", b"\n", b"\r\n"])) + value[at:]


_NAMES = st.sampled_from(
    [
        b"grpc-message",
        b"grpc-status",
        b"x-a",
        b"content-type",
        b"te",
        b"host",
        b"connection",
        b"keep-alive",
        b"Upper",
        b"x y",
        b"x:y",
        b"",
        b"caf\xc3\xa9",
        b":status",
        b":method",
        b":path",
        b":scheme",
        b":authority",
        b":protocol",
        b":custom",
    ]
)
_FIELD_VALUES = st.one_of(
    values(),
    illegal_values(),
    st.sampled_from([b"trailers", b"TRAILERS", b"gzip", b"200", b"GET", b"CONNECT", b"/", b"h"]),
)
_BLOCKS = st.sampled_from(list(HeaderBlock))


def _flags(block: HeaderBlock) -> h2.utilities.HeaderValidationFlags:
    return h2.utilities.HeaderValidationFlags(
        is_client=block is not HeaderBlock.REQUEST,
        is_trailer=block is HeaderBlock.TRAILERS,
        is_response_header=block is HeaderBlock.RESPONSE,
        is_push_promise=False,
    )


def _marked(value: bytes) -> bytes:
    """``value`` with the spaces and tabs around it as bytes h2 takes there
    (1 for a space, 2 for a tab): h2 then judges everything else."""
    body = value.strip(b" \t")
    if not body:
        return value.replace(b" ", b"\x01").replace(b"\t", b"\x02")
    start = value.index(body)
    mark = bytes.maketrans(b" \t", b"\x01\x02")
    return value[:start].translate(mark) + body + value[start + len(body) :].translate(mark)


def h2_refuses(headers: list[tuple[bytes, bytes]], block: HeaderBlock) -> bool:
    """The oracle: whether h2's own validation refuses ``headers`` for any
    reason but the one against surrounding whitespace."""
    marked = [(name, _marked(value)) for name, value in headers]
    try:
        list(h2.utilities.validate_headers(marked, _flags(block)))
    except h2.exceptions.ProtocolError:
        return True
    return False


_BASES = {
    HeaderBlock.RESPONSE: [[(b":status", b"200")], [(b":status", b"103")]],
    HeaderBlock.TRAILERS: [[(b"grpc-status", b"0")]],
    HeaderBlock.REQUEST: [
        [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/"), (b":authority", b"h")],
        [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"host", b"h")],
        [(b":method", b"CONNECT"), (b":authority", b"h")],
        [
            (b":method", b"CONNECT"),
            (b":protocol", b"websocket"),
            (b":scheme", b"https"),
            (b":path", b"/"),
            (b":authority", b"h"),
        ],
    ],
}


@st.composite
def blocks(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], HeaderBlock]:
    """A header block of each kind, well-formed to start with, then a few
    fields of the family put anywhere in it and a few of its own taken out
    (the rules about which pseudo-header fields, where and how often)."""
    block = draw(_BLOCKS)
    headers: list[tuple[bytes, bytes]] = list(draw(st.sampled_from(_BASES[block])))
    for _ in range(draw(st.integers(0, 2))):
        drop: bool = draw(st.booleans())
        if headers and drop:
            del headers[draw(st.integers(0, len(headers) - 1))]
    for _ in range(draw(st.integers(0, 3))):
        field = draw(st.tuples(_NAMES, _FIELD_VALUES))
        headers.insert(draw(st.integers(0, len(headers))), field)
    return headers, block


# -- the properties ------------------------------------------------------------


@settings(max_examples=500)
@given(
    generated=st.one_of(
        blocks(), st.tuples(st.lists(st.tuples(_NAMES, _FIELD_VALUES), max_size=6), _BLOCKS)
    )
)
@example(generated=([(b":status", b"200"), (b"grpc-message", b" ")], HeaderBlock.RESPONSE))
@example(generated=([(b"grpc-status", b"9"), (b"grpc-message", b" lead")], HeaderBlock.TRAILERS))
@example(generated=([(b"grpc-message", b"trail ")], HeaderBlock.TRAILERS))
@example(generated=([(b"te", b" trailers")], HeaderBlock.TRAILERS))
@example(
    generated=(
        [(b":method", b"CONNECT"), (b":authority", b"h"), (b":protocol", b"ws")],
        HeaderBlock.REQUEST,
    )
)
@example(
    generated=(
        [(b":method", b"GET"), (b":scheme", b"h"), (b":path", b""), (b"host", b"h")],
        HeaderBlock.REQUEST,
    )
)
def test_a_block_is_refused_as_h2_refuses_it_but_for_whitespace(
    generated: tuple[list[tuple[bytes, bytes]], HeaderBlock],
) -> None:
    headers, block = generated
    if h2_refuses(headers, block):
        with pytest.raises(
            RemoteProtocolError, match=f"^malformed HTTP/2 {block.value} "
        ) as caught:
            check_received(headers, block)
        assert caught.value.status == 400
    else:
        check_received(headers, block)  # taken


_HEADS = {
    HeaderBlock.RESPONSE: [(b":status", b"200")],
    HeaderBlock.TRAILERS: [],
    HeaderBlock.REQUEST: [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/pkg.S/M"),
        (b":authority", b"h"),
    ],
}


@given(value=values(), block=_BLOCKS)
@example(value=b" ", block=HeaderBlock.TRAILERS)
@example(value=b" lead", block=HeaderBlock.TRAILERS)
@example(value=b"trail ", block=HeaderBlock.TRAILERS)
@example(value=b"", block=HeaderBlock.RESPONSE)
def test_any_legal_value_is_taken_and_sent_back_byte_for_byte(
    value: bytes, block: HeaderBlock
) -> None:
    fields = [(b"grpc-message", value), (b"x-Mixed-Case", value)]
    check_received([*_HEADS[block], fields[0]], block)  # no error
    assert h2_sent(fields) == [(b"grpc-message", value), (b"x-mixed-case", value)]


@given(value=illegal_values(), block=_BLOCKS)
def test_a_nul_cr_or_lf_is_never_taken_nor_sent(value: bytes, block: HeaderBlock) -> None:
    with pytest.raises(RemoteProtocolError, match=r"a (NUL|CR|LF) byte in the value"):
        check_received([*_HEADS[block], (b"grpc-message", value)], block)
    with pytest.raises(LocalProtocolError, match=r"a (NUL|CR|LF) byte in the value"):
        h2_sent([(b"grpc-message", value)])
    with pytest.raises(h11.LocalProtocolError):  # and h11 never writes one
        h11.Response(status_code=200, headers=h11_sent([(b"x-a", value)]))


_H11_VALUE = st.binary(max_size=12).map(
    lambda v: bytes(b for b in v if b in b" \t" or 0x21 <= b <= 0x7E or b >= 0x80)
)


@given(lead=st.sampled_from([b"", b" ", b"\t ", b"  "]), core=_H11_VALUE, trail=_PAD)
def test_over_http11_a_value_is_what_an_http11_reader_reads(
    lead: bytes, core: bytes, trail: bytes
) -> None:
    """h11 refuses a value with spaces around it: they go (HTTP/1.1's
    padding), and the client reads the value it would have read."""
    value = lead + core + trail
    head = h11.Response(
        status_code=200, headers=h11_sent([(b"x-a", value), (b"content-length", b"0")])
    )
    server = h11.Connection(h11.SERVER)
    server.receive_data(b"GET / HTTP/1.1\r\nhost: h\r\n\r\n")
    server.next_event()
    server.next_event()
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("host", "h")]))
    client.send(h11.EndOfMessage())
    client.receive_data(server.send(head) or b"")
    got = client.next_event()
    assert isinstance(got, h11.Response)
    assert dict(got.headers)[b"x-a"] == value.strip(b" \t")


def test_what_h2_sent_leaves_out() -> None:
    headers = [
        (b":status", b"500"),
        (b"", b"no name"),
        (b"Connection", b"close"),
        (b"proxy-connection", b"x"),
        (b"keep-alive", b"1"),
        (b"transfer-encoding", b"chunked"),
        (b"upgrade", b"h2c"),
        (b"te", b"trailers"),
        (b"host", b"h"),
        (b"X-Kept", b" 1 "),
    ]
    assert h2_sent(headers) == [(b"x-kept", b" 1 ")]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (b"x y", "an illegal byte b' ' in the header name b'x y'"),
        (b"x:y", "a colon inside the header name b'x:y'"),
        (b"caf\xc3\xa9", "an illegal byte b'\\xc3'"),
    ],
)
def test_a_name_no_http2_client_takes_is_not_sent(name: bytes, why: str) -> None:
    with pytest.raises(LocalProtocolError, match="fix the header on its cassette line") as caught:
        h2_sent([(name, b"1")])
    assert why in str(caught.value)


_POST = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/")]


@pytest.mark.parametrize(
    ("headers", "block", "why"),
    [
        ([(b":status", b"200"), (b":status", b"200")], HeaderBlock.RESPONSE, "twice"),
        ([(b"x-a", b"1"), (b":status", b"200")], HeaderBlock.RESPONSE, "after a regular"),
        ([(b":status", b"200"), (b":custom", b"1")], HeaderBlock.RESPONSE, "unknown pseudo"),
        ([(b"x-a", b"1")], HeaderBlock.RESPONSE, "no :status"),
        ([(b":status", b"200"), (b":path", b"/")], HeaderBlock.RESPONSE, "request pseudo"),
        ([(b":status", b"200")], HeaderBlock.TRAILERS, "pseudo-header fields in trailers"),
        ([(b":path", b"/"), (b":authority", b"h")], HeaderBlock.REQUEST, "no :method"),
        ([*_POST, (b":authority", b"h"), (b":status", b"1")], HeaderBlock.REQUEST, ":status in"),
        ([(b":method", b"CONNECT"), (b":path", b"/")], HeaderBlock.REQUEST, "CONNECT request"),
        (
            [(b":method", b"GET"), (b":path", b"/"), (b"host", b"h")],
            HeaderBlock.REQUEST,
            "no :scheme",
        ),
        (
            [(b":method", b"GET"), (b":scheme", b"h"), (b"host", b"h")],
            HeaderBlock.REQUEST,
            "no :path",
        ),
        ([*_POST, (b":protocol", b"ws"), (b"host", b"h")], HeaderBlock.REQUEST, "no CONNECT"),
        ([*_POST, (b"host", b"h"), (b"host", b"h")], HeaderBlock.REQUEST, "more than one host"),
        (_POST, HeaderBlock.REQUEST, "neither :authority nor host"),
        ([*_POST, (b":authority", b"a"), (b"host", b"b")], HeaderBlock.REQUEST, "differ"),
        (
            [(b":method", b"GET"), (b":scheme", b"h"), (b":path", b""), (b"host", b"h")],
            HeaderBlock.REQUEST,
            "empty :path",
        ),
        ([(b"grpc-status", b"0"), (b"te", b"gzip")], HeaderBlock.TRAILERS, "only 'trailers'"),
        ([(b"keep-alive", b"1")], HeaderBlock.TRAILERS, "connection-specific"),
    ],
)
def test_each_rule_h2_keeps_is_kept(
    headers: list[tuple[bytes, bytes]], block: HeaderBlock, why: str
) -> None:
    assert h2_refuses(headers, block)  # h2 refuses it too: one of its rules
    with pytest.raises(RemoteProtocolError, match=why):
        check_received(headers, block)


@pytest.mark.parametrize(
    ("headers", "block"),
    [
        ([(b":method", b"CONNECT"), (b":authority", b"h")], HeaderBlock.REQUEST),
        (
            [*_POST, (b":authority", b"h"), (b"host", b"h"), (b"te", b"Trailers")],
            HeaderBlock.REQUEST,
        ),
        ([(b":status", b"103"), (b"link", b" </a>; rel=preload ")], HeaderBlock.RESPONSE),
    ],
)
def test_a_well_formed_block_is_taken(
    headers: list[tuple[bytes, bytes]], block: HeaderBlock
) -> None:
    check_received(headers, block)


# -- linear in the block -------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    ["many fields", "one long value", "many hosts"],
)
def test_checking_and_sending_are_linear_in_the_block(shape: str) -> None:
    """time(10 x block) / time(block) stays near 10 for each way a block
    grows (a generous bound: the machine is shared; a check quadratic in
    the block would be near 100).  Each check is a pass over the bytes."""

    def block(n: int) -> list[tuple[bytes, bytes]]:
        if shape == "many fields":
            return [(b"x-field-%d" % i, b" value %d " % i) for i in range(n)]
        if shape == "one long value":
            return [(b"grpc-message", b" no more" * n)]
        return [(b"x-a", b"1")] * n

    def check(headers: list[tuple[bytes, bytes]]) -> None:
        check_received([(b":status", b"200"), *headers], HeaderBlock.RESPONSE)
        h2_sent(headers)

    small, large = block(2_000), block(20_000)
    check(small)  # warmed
    ratio = best_of(lambda: check(large), 7) / best_of(lambda: check(small), 7)
    assert ratio < 40, ratio
