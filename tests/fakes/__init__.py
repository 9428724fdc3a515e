"""Test doubles for Reel's tests: a fake OpenAI / Anthropic / Gemini upstream.

Import from :mod:`tests.fakes.upstream` (server, thread runner, helpers); the
``*_wire`` modules build the provider payloads and :mod:`tests.fakes.routes`
maps a request to its reply, both without any I/O.
"""
