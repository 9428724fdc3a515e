"""Descriptor sets for the tests: xai-sdk's own (its generated modules'
descriptors with every file they import, as ``protoc --include_imports``
writes them) and a tiny one built here, with message classes to encode
test messages by.  Needs protobuf (the ``grpc`` extra); a test module
imports this after its ``importorskip``."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["TINY_METHOD", "descriptor_set", "tiny_messages", "tiny_set", "xai_set"]

#: The tiny set's one call.
TINY_METHOD = "/tiny.Talk/Say"


def descriptor_set(*files: Any) -> bytes:
    """A serialized ``FileDescriptorSet`` of ``files`` (protobuf file
    descriptors) and everything they import, each after its imports."""
    out: list[Any] = []
    seen: set[str] = set()

    def add(fd: Any) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dependency in fd.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        out.append(proto)

    for fd in files:
        add(fd)
    data: bytes = descriptor_pb2.FileDescriptorSet(file=out).SerializeToString()
    return data


def xai_set() -> bytes:
    """xai-sdk's chat API (``xai_api.Chat``) and its imports."""
    from xai_sdk.proto.v6 import chat_pb2

    return descriptor_set(chat_pb2.DESCRIPTOR)


def _tiny_file() -> Any:
    f = descriptor_pb2.FileDescriptorProto(name="tiny/talk.proto", package="tiny", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    ask = f.message_type.add(name="Ask")
    ask.field.add(name="model", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    ask.field.add(name="words", number=2, type=T.TYPE_STRING, label=T.LABEL_REPEATED)
    ask.field.add(name="big_number", number=3, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    ask.field.add(name="blob", number=4, type=T.TYPE_BYTES, label=T.LABEL_OPTIONAL)
    ask.field.add(name="seed", number=5, type=T.TYPE_UINT32, label=T.LABEL_OPTIONAL)
    inner = ".tiny.Inner"
    message, repeated = T.TYPE_MESSAGE, T.LABEL_REPEATED
    ask.field.add(name="parts", number=6, type=message, type_name=inner, label=repeated)
    for name, number, held in (("tags", 7, True), ("labels", 9, False)):
        entry = ask.nested_type.add(name=name.capitalize() + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
        value = entry.field.add(name="value", number=2, label=T.LABEL_OPTIONAL)
        if held:
            value.type, value.type_name = message, inner
        else:
            value.type = T.TYPE_STRING
        type_name = f".tiny.Ask.{entry.name}"
        ask.field.add(name=name, number=number, type=message, type_name=type_name, label=repeated)
    ask.field.add(name="single", number=8, type=message, type_name=inner, label=T.LABEL_OPTIONAL)
    f.message_type.add(name="Inner").field.add(
        name="note", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL
    )
    answer = f.message_type.add(name="Answer")
    answer.field.add(name="text", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    answer.field.add(name="tokens", number=2, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL)
    service = f.service.add(name="Talk")
    service.method.add(name="Say", input_type=".tiny.Ask", output_type=".tiny.Answer")
    return f


def tiny_set() -> bytes:
    """The tiny set: ``tiny.Talk/Say`` takes an ``Ask`` (model, words,
    big_number int64, blob bytes, seed; parts, tags and single: ``Inner``
    messages, repeated, in a map and alone; labels, a map of strings) and
    answers an ``Answer``."""
    data: bytes = descriptor_pb2.FileDescriptorSet(file=[_tiny_file()]).SerializeToString()
    return data


def tiny_messages() -> tuple[Any, Any]:
    """The ``Ask`` and ``Answer`` classes of the tiny set."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_tiny_file())
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("tiny.Ask")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("tiny.Answer")),
    )
