#: The version of Reel (the core and its bindings are released together).
__version__ = "0.1.0.dev0"

#: The newest cassette schema this version reads and the one it writes (2:
#: WebSocket sessions, the ``websocket`` field; 3: assets, large base64
#: payloads kept beside the cassette, see ``_assets``; older ones are still
#: read).
SCHEMA_VERSION = 3
