__version__ = "0.1.0.dev0"

#: The newest cassette schema this version reads and the one it writes.
SCHEMA_VERSION = 1
