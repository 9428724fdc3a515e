"""gRPC messages read through a descriptor set: bytes in, JSON out.

Without a descriptor set a gRPC message is bytes: it is matched as bytes
and shown as base64 with its length.  Given one (a ``FileDescriptorSet``,
what ``protoc --descriptor_set_out --include_imports`` or grpcio-tools
writes), :class:`ProtoSchema` maps a call's path ``/pkg.Service/Method`` to
its input and output message types and reads a body of messages as
protobuf's JSON mapping writes them (fields by their proto names, 64-bit
integers as strings, bytes as base64).

Theory of operation.  A request body of whole messages reads as the JSON
value ``{"messages": [...]}`` (:meth:`ProtoSchema.request_json`), and
:func:`body_value` is the one place a body's JSON value is taken: the
match key's canonical body and the miss report's diff both read it, so
every match mode (normalized, ignore-fields by JSON path, fuzzy) compares
gRPC messages as JSON and a diff names ``messages[0].model``, not bytes.
A body the schema does not read (its method is not in the set, a message
does not parse, a compressed one does not decompress within the limit)
is bytes, as without a schema; :meth:`ProtoSchema.read` says why.  A
compressed message is read decompressed (:func:`~reel_core._grpc.message_payload`).

Nothing here writes a cassette: a schema changes how a body is read, never
what is stored.  protobuf is an optional dependency (the ``grpc`` extra),
imported when a schema is built: its import loads ``threading`` for its
locks, so the core imports it only then.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from ._body import parse_json
from ._decode import DecodeError
from ._errors import ConfigError
from ._grpc import message_payload, whole_frames
from ._http import Limits

__all__ = [
    "INSTALL",
    "MAX_SHOWN",
    "NO_SCHEMA",
    "ProtoSchema",
    "SchemaNote",
    "body_value",
    "grpc_method",
    "load_protobuf",
    "request_frames",
    "shown_messages",
]

#: Bytes of a message shown (as base64) when it is shown as bytes.
MAX_SHOWN = 4096
#: What is said of messages shown as bytes for want of a schema.
NO_SCHEMA = "no descriptor set given: the messages are shown as bytes"

#: What to install for descriptor sets.
INSTALL = "pip install 'reel-llm[grpc]'"


#: The protobuf modules a schema uses.
_MODULES = ("descriptor_pb2", "descriptor_pool", "json_format", "message_factory", "unknown_fields")


def load_protobuf() -> tuple[Any, Any, Any, Any, Any]:
    """protobuf's ``descriptor_pb2``, ``descriptor_pool``, ``json_format``,
    ``message_factory`` and ``unknown_fields``; an :class:`ImportError`
    naming the extra to install when protobuf is missing."""
    try:
        modules = tuple(importlib.import_module(f"google.protobuf.{name}") for name in _MODULES)
    except ImportError as exc:
        raise ImportError(
            f"reading gRPC messages with a descriptor set needs protobuf: {INSTALL}"
        ) from exc
    return modules[0], modules[1], modules[2], modules[3], modules[4]


def _unknown_numbers(unknown_fields: Any, message: Any) -> list[int]:
    """The numbers of the fields ``message`` (and every message inside it)
    holds that its type does not describe."""
    numbers = [field.field_number for field in unknown_fields.UnknownFieldSet(message)]
    for field, value in message.ListFields():
        kind = field.message_type
        if kind is None:
            continue
        if kind.GetOptions().map_entry:
            held = kind.fields_by_name["value"].message_type is not None
            inner = list(value.values()) if held else []
        elif _repeated(field):
            inner = list(value)
        else:
            inner = [value]
        for item in inner:
            numbers += _unknown_numbers(unknown_fields, item)
    return numbers


def _repeated(field: Any) -> bool:
    """Whether a field is repeated (``is_repeated`` since protobuf 6, its
    ``label`` before)."""
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:  # pragma: no cover - protobuf before 6
        return bool(field.label == field.LABEL_REPEATED)
    return bool(repeated)


def grpc_method(path: str) -> tuple[str, str] | None:
    """``(service, method)`` of a gRPC call's path ``/pkg.Service/Method``,
    else ``None``."""
    service, sep, method = path.removeprefix("/").partition("/")
    if not (path.startswith("/") and sep and service and method) or "/" in method:
        return None
    return service, method


class SchemaNote(ValueError):
    """Why a schema does not read a body: shown beside its bytes."""


class ProtoSchema:
    """The message types of a descriptor set, by the calls that use them.
    Equal (and hashed) by the set's bytes, so match settings holding one
    key an index of their own."""

    def __init__(self, data: bytes, name: str = "descriptor set") -> None:
        """Build the pool of ``data``, a serialized ``FileDescriptorSet``
        (``name`` says where it came from in messages).  Not one, or one
        whose files import a file it does not hold: :class:`ConfigError`
        saying so; protobuf missing: :class:`ImportError`."""
        pb2, pools, self._json, self._factory, self._unknown = load_protobuf()
        self.digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.name = name
        files = pb2.FileDescriptorSet()
        try:
            files.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError
            raise _not_a_set(name, f"it does not parse ({exc})") from None
        protos = list(files.file)
        if not protos or not all(p.name for p in protos):
            raise _not_a_set(name, "it holds no file descriptor")
        self._pool = pools.DescriptorPool()
        _add_in_order(self._pool, protos, name)
        #: ``/pkg.Service/Method`` -> (input type, output type), the calls the set describes.
        self.methods: dict[str, tuple[Any, Any]] = {}
        for proto in protos:
            for service in proto.service:
                full = f"{proto.package}.{service.name}" if proto.package else service.name
                described = self._pool.FindServiceByName(full)
                for method in described.methods:
                    self.methods[f"/{full}/{method.name}"] = (
                        method.input_type,
                        method.output_type,
                    )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtoSchema) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"ProtoSchema({self.name!r}, {len(self.methods)} methods)"

    def read(
        self,
        path: str,
        frames: Sequence[bytes],
        *,
        response: bool = False,
        limit: int = Limits.max_body,
    ) -> list[Any]:
        """The JSON of each message of ``frames`` (whole messages, prefix
        included) of the call to ``path``: its request's (its response's
        with ``response``).  Raises :class:`SchemaNote` saying why it
        cannot: the set does not describe the method, a frame is no whole
        message, a message does not parse or decompress."""
        types = self.methods.get(path)
        if types is None:
            raise SchemaNote(f"{self.name} does not describe {path}: shown as bytes")
        kind = types[1] if response else types[0]
        out = []
        for i, frame in enumerate(frames):
            whole = whole_frames(frame)
            if whole is None or len(whole) != 1:
                raise SchemaNote(f"message {i} is not a whole gRPC message: shown as bytes")
            try:
                payload = message_payload(frame[5:], bool(frame[0]), limit)
            except DecodeError as exc:
                raise SchemaNote(f"message {i} is compressed and not read: {exc}") from None
            out.append(self._decode(kind, payload, i))
        return out

    def _decode(self, kind: Any, payload: bytes, i: int) -> Any:
        try:
            message = self._factory.GetMessageClass(kind)()
            message.ParseFromString(payload)
            unknown = _unknown_numbers(self._unknown, message)
            value = self._json.MessageToDict(
                message, preserving_proto_field_name=True, descriptor_pool=self._pool
            )
        except Exception as exc:  # protobuf's own error types
            raise SchemaNote(
                f"message {i} does not parse as {kind.full_name} ({exc}): shown as bytes"
            ) from None
        if unknown:  # its JSON would leave them out: two other messages would read alike
            numbers = ", ".join(str(n) for n in sorted(set(unknown)))
            raise SchemaNote(
                f"message {i} has fields {kind.full_name} does not describe (numbers "
                f"{numbers}; a newer schema?): shown as bytes"
            )
        return value

    def message_reader(self, path: str) -> Callable[[bytes], Any] | None:
        """How a replayed gRPC session reads the client messages of the
        call to ``path`` (a whole message each, prefix included) as JSON:
        the ``decode=`` of :class:`~reel_core.tools.H2Session`; ``None``
        when the set does not describe the call.  The reader raises
        :class:`SchemaNote` (a ``ValueError``) for a message it cannot read."""
        if path not in self.methods:
            return None
        return functools.partial(self._client_message, path)

    def _client_message(self, path: str, data: bytes) -> Any:
        return self.read(path, [data])[0]

    def request_json(self, path: str, body: bytes) -> dict[str, Any] | None:
        """A request body of whole messages as ``{"messages": [...]}``, or
        ``None`` when this schema does not read it."""
        frames = whole_frames(body)
        if frames is None or path not in self.methods:
            return None
        try:
            return {"messages": self.read(path, frames)}
        except SchemaNote:
            return None


def _not_a_set(name: str, why: str) -> ConfigError:
    return ConfigError(
        f"{name} is not a descriptor set (a serialized FileDescriptorSet): {why}; write one "
        "with protoc (or grpcio-tools' grpc_tools.protoc), its descriptor_set_out and "
        "include_imports options"
    )


def _add_in_order(pool: Any, protos: list[Any], name: str) -> None:
    """Add each file after the files it imports (a set lists them in any
    order); one importing a file the set lacks is a :class:`ConfigError`."""
    given = {p.name for p in protos}
    added: set[str] = set()
    waiting = protos
    while waiting:
        ready = [p for p in waiting if set(p.dependency) <= added]
        if not ready:
            missing = sorted({d for p in waiting for d in p.dependency} - given)
            why = (
                f"{', '.join(missing)} is imported and not in it "
                "(protoc's include_imports option adds it)"
                if missing
                else "its files import each other in a cycle"
            )
            raise _not_a_set(name, why)
        for proto in ready:
            try:
                pool.Add(proto)
            except Exception as exc:  # protobuf's TypeError / its own errors
                raise _not_a_set(name, f"{proto.name} does not build ({exc})") from None
            added.add(proto.name)
        waiting = [p for p in waiting if p.name not in added]


def body_value(body: bytes, path: str, schema: ProtoSchema | None) -> tuple[bool, Any]:
    """``(is_json, value)`` of a request body as matching and the miss
    report read it: a gRPC body the schema reads as ``{"messages": [...]}``,
    else JSON as it is, else not JSON.  The one place."""
    if schema is not None:
        value = schema.request_json(path, body)
        if value is not None:
            return True, value
    return parse_json(body)


def _as_bytes(frame: bytes) -> dict[str, Any]:
    whole = len(whole_frames(frame) or ()) == 1
    data = frame[5:] if whole else frame
    shown: dict[str, Any] = {"bytes": len(data)}
    if whole:
        shown["compressed"] = bool(frame[0])
    else:
        shown["unfinished"] = True  # the tail of a stream cut inside a message
    shown["base64"] = base64.b64encode(data[:MAX_SHOWN]).decode("ascii")
    if len(data) > MAX_SHOWN:
        shown["shown"] = MAX_SHOWN
    return shown


def request_frames(path: str, body: bytes) -> list[bytes] | None:
    """The messages of a gRPC call's request body (a ``/pkg.Service/Method``
    path, a body of whole messages), else ``None``."""
    return whole_frames(body) if grpc_method(path) is not None else None


def shown_messages(
    frames: Sequence[bytes],
    path: str,
    schema: ProtoSchema | None,
    *,
    response: bool = False,
) -> tuple[list[Any], str | None]:
    """gRPC messages (whole frames) as a viewer shows them, and a note:
    each as its JSON when ``schema`` reads them all (no note), else each as
    ``{"bytes": n, "compressed": bool, "base64": ...}`` (the first
    :data:`MAX_SHOWN` bytes; ``"shown"`` says how many when cut) and the
    note saying why.  Nothing here changes what is stored."""
    if schema is not None:
        try:
            return schema.read(path, frames, response=response), None
        except SchemaNote as note:
            return [_as_bytes(f) for f in frames], str(note)
    return [_as_bytes(f) for f in frames], NO_SCHEMA
