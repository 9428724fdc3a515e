"""Which proxy, if any, a request to an upstream goes through, from the
``*_PROXY`` environment variables (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY``, ``NO_PROXY``, in either case), the way urllib and httpx read
them.  Shared by the proxy's upstream client (``_upstream.py``) and the
in-process transports; a module of its own so that importing a transport
does not import the proxy's client (ssl, anyio's TLS streams).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping

__all__ = ["environment_proxies", "proxy_for"]


def environment_proxies(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{scheme: proxy URL}`` (and ``"no"``: the ``NO_PROXY`` list) from
    ``*_PROXY`` variables, as :func:`urllib.request.getproxies_environment`
    reads them: any case, the lower-case one winning; ``HTTP_PROXY`` is
    ignored in a CGI script (``REQUEST_METHOD`` set)."""
    env = os.environ if environ is None else environ
    proxies: dict[str, str] = {}
    for name, value in env.items():
        if value and name[-6:].lower() == "_proxy":
            proxies[name[:-6].lower()] = value
    if "REQUEST_METHOD" in env:
        proxies.pop("http", None)
    for name, value in env.items():
        if name[-6:] == "_proxy":
            if value:
                proxies[name[:-6].lower()] = value
            else:
                proxies.pop(name[:-6].lower(), None)
    return proxies


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def proxy_for(scheme: str, host: str, port: int, proxies: Mapping[str, str]) -> str | None:
    """The proxy URL to reach ``scheme://host:port`` through (``None``:
    connect directly).  ``HTTPS_PROXY`` is for https upstreams,
    ``HTTP_PROXY`` for http ones, ``ALL_PROXY`` for both when the other is
    unset; ``NO_PROXY`` (host names, ``.suffix`` or ``suffix`` for a
    domain and its subdomains, ``host:port``, ``*`` for all) bypasses them,
    as urllib and httpx read it.  A loopback upstream (``localhost``,
    127.0.0.0/8, ``::1``) is never proxied."""
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or _loopback(host):
        return None
    if _bypassed(host, port, proxies.get("no", "")):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` names ``host`` (or ``host:port``): ``*``, the
    host itself, or a domain it is in (``example.com`` and ``.example.com``
    both cover ``api.example.com``), as urllib's ``proxy_bypass_environment``."""
    if no_proxy.strip() == "*":
        return True
    host = host.lower()
    with_port = f"{host}:{port}"
    for entry in no_proxy.split(","):
        name = entry.strip().lstrip(".").lower()
        if name.startswith("[") and "]" in name:  # [::1] or [::1]:443
            name = name[1:].replace("]", "", 1)
        if not name:
            continue
        if name in (host, with_port):
            return True
        if host.endswith("." + name) or with_port.endswith("." + name):
            return True
    return False
