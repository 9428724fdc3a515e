"""The proxy's TLS listener (``--tls``): its certificate, given or generated.

Some clients dial ``wss://``/``https://`` whatever base URL they are given
(google-genai's ``live.connect()`` rewrites it to ``wss://``), so the proxy
can listen behind TLS.  The certificate is the user's (``--cert``/``--key``)
or, on first use, one generated with ``trustme`` (the optional ``tls``
extra: ``pip install 'reel-llm[tls]'``): a local CA of its own, written to
``ca.pem`` in the TLS directory (``REEL_TLS_DIR``, default
``~/.cache/reel/tls``), and a certificate it signed for ``localhost``,
``127.0.0.1`` and ``::1``.  Clients trust it with ``SSL_CERT_FILE=ca.pem``.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from .._settings import tls_dir_from_env

__all__ = [
    "TLSFiles",
    "TLSSetupError",
    "alpn_protocols",
    "default_tls_dir",
    "local_certificate",
    "server_context",
]

#: The names the generated certificate is valid for.
NAMES = ("localhost", "127.0.0.1", "::1")


class TLSSetupError(Exception):
    """The TLS listener cannot be set up: the message says what to do."""


@dataclass(frozen=True)
class TLSFiles:
    """A certificate chain and its key (PEM), and the CA a client trusts
    (``None``: the user's own certificate, trusted as the user arranged)."""

    cert: Path
    key: Path
    ca: Path | None = None


def default_tls_dir(environ: dict[str, str] | None = None) -> Path:
    """Where a generated certificate lives: ``REEL_TLS_DIR`` (read through
    the settings), else the user's cache directory (``XDG_CACHE_HOME`` or
    ``~/.cache``) + ``reel/tls``."""
    env = os.environ if environ is None else environ
    given = tls_dir_from_env(env)
    if given is not None:
        return given
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "reel" / "tls"


def local_certificate(directory: Path) -> TLSFiles:
    """The generated certificate in ``directory``, made on first use."""
    files = TLSFiles(directory / "cert.pem", directory / "key.pem", directory / "ca.pem")
    assert files.ca is not None
    if files.cert.is_file() and files.key.is_file() and files.ca.is_file():
        return files
    try:
        import trustme
    except ImportError:
        raise TLSSetupError(
            "--tls without --cert/--key generates a local certificate with trustme, which is "
            "not installed: pip install 'reel-llm[tls]', or give your own --cert FILE --key FILE"
        ) from None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="Reel local proxy")
        leaf = ca.issue_cert(*NAMES)
        ca.cert_pem.write_to_path(str(files.ca))
        leaf.private_key_pem.write_to_path(str(files.key))
        with files.cert.open("wb") as out:
            for blob in leaf.cert_chain_pems:
                out.write(blob.bytes())
        files.key.chmod(0o600)
    except OSError as exc:
        raise TLSSetupError(
            f"cannot write the proxy's certificate into {directory} ({exc.strerror or exc}): "
            "set REEL_TLS_DIR to a writable directory, or give --cert FILE --key FILE"
        ) from None
    return files


def server_context(files: TLSFiles) -> ssl.SSLContext:
    """A server context for the listener: ALPN offers ``h2`` (when the h2
    package is there to serve it) and ``http/1.1``; the listener serves
    each connection with what its client chose."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as exc:
        raise TLSSetupError(
            f"cannot load the certificate {files.cert} with the key {files.key} ({exc}): give a "
            "PEM certificate chain (--cert) and its private key (--key)"
        ) from None
    context.set_alpn_protocols(alpn_protocols())
    return context


def alpn_protocols() -> list[str]:
    """What the listener offers by ALPN, best first: ``h2`` only when the
    proxy can speak it (the ``h2`` extra installed)."""
    return ["h2", "http/1.1"] if importlib.util.find_spec("h2") is not None else ["http/1.1"]
