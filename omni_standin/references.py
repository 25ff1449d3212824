"""Conditioning references: URL downloads and image/video decoding, bounded (docs/vllm-omni-contract.md §4, §9).

Downloads run on the event loop without blocking it (`/health` and every other route keep answering) under one
deadline for the whole transfer and the request-size cap. They go only to public addresses: loopback, private,
link-local and multicast destinations are refused unless the host is listed in `--allowed-media-domains`, which,
as in vLLM, then becomes the only hosts fetched. The address checked is the address connected to, so a name that
resolves differently the second time gains nothing. Decoding runs in a thread; an image is refused by its header's
size before its pixels are decoded, and of a video only the frames Cosmos 3 reads are decoded.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import ipaddress
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpcore
from fastapi import HTTPException

from helpers import media
from helpers.errors import MediaError
from omni_standin.limits import Limits, over

# Decoders PIL may use on untrusted bytes: the conditioning formats, not every plugin PIL can load.
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "GIF", "TIFF")


@dataclass(frozen=True)
class FetchPolicy:
    """Where reference URLs may point, and how long a download may take in all."""

    allowed_domains: frozenset[str] = frozenset()
    timeout_s: float = 30.0


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class _PublicOnlyBackend(httpcore.AnyIOBackend):
    """Resolves the host itself, refuses non-public addresses, and connects to the address it checked."""

    def __init__(self, refusal: str):
        self.refusal = refusal

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = [str(info[4][0]) for info in infos]
        private = [a for a in addresses if not _is_public(a)]
        if private:
            raise HTTPException(400, self.refusal.format(address=private[0]))
        return await super().connect_tcp(addresses[0], port, timeout, local_address, socket_options)


async def fetch(url: str, where: str, limits: Limits, policy: FetchPolicy) -> bytes:
    """The bytes behind an http(s) URL, or a 400 naming `where` (e.g. `image_reference.image_url`) and the cause."""
    try:
        parsed = httpcore.URL(url)
        host = parsed.host.decode("ascii").lower()
    except Exception:
        raise HTTPException(400, f"Invalid {where}: {url[:200]!r} is not a valid URL.") from None
    refusal = (
        f"Invalid {where}: {host} resolves to {{address}}, a loopback, private or link-local address, which this "
        "server does not fetch from. Start the server with --allowed-media-domains "
        f"{host} to allow it."
    )
    if policy.allowed_domains:
        if host not in policy.allowed_domains:
            raise HTTPException(
                400,
                f"Invalid {where}: {host} is not one of the hosts this server fetches from (--allowed-media-domains "
                f"{' '.join(sorted(policy.allowed_domains))}).",
            )
        backend: httpcore.AsyncNetworkBackend = httpcore.AnyIOBackend()
    else:
        backend = _PublicOnlyBackend(refusal)
    try:
        async with asyncio.timeout(policy.timeout_s):
            return await _download(url, where, limits, backend)
    except TimeoutError:
        raise HTTPException(
            400, f"Invalid {where}: the download did not finish within {policy.timeout_s:g} s (--media-fetch-timeout)."
        ) from None
    except (
        httpcore.NetworkError,
        httpcore.TimeoutException,
        httpcore.ProtocolError,
        httpcore.UnsupportedProtocol,
        OSError,
    ) as exc:
        detail = str(exc) or type(exc).__name__
        raise HTTPException(400, f"Invalid {where}: could not download ({detail}).") from None


async def _download(url: str, where: str, limits: Limits, backend: httpcore.AsyncNetworkBackend) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async with (
        httpcore.AsyncConnectionPool(network_backend=backend) as pool,
        pool.stream("GET", url) as response,
    ):
        if response.status != 200:
            raise HTTPException(400, f"Invalid {where}: server returned HTTP {response.status}.")
        declared = next((v for k, v in response.headers if k.lower() == b"content-length"), b"")
        if declared.isdigit():
            limits.check_bytes(f"{where} download", int(declared))
        async for chunk in response.aiter_stream():
            size += len(chunk)
            limits.check_bytes(f"{where} download", size)
            chunks.append(chunk)
    return b"".join(chunks)


def data_url_bytes(url: str, where: str) -> bytes:
    try:
        return base64.b64decode(url.split(",", 1)[1], validate=True)
    except (IndexError, ValueError, binascii.Error):
        raise HTTPException(400, f"Invalid {where}: malformed data URL.") from None


def decode_image(data: bytes, field: str, limits: Limits) -> Any:
    """An RGB PIL image, or None when the bytes are not an image; over-size images are refused before decoding."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as image:
            limits.check_reference(field, *image.size)
            return image.convert("RGB")
    except Image.DecompressionBombError:
        # PIL refuses an image over twice its own pixel limit (about 179 million) while opening it, before the size
        # can be read; that is far over the default limit, and no flag can raise PIL's.
        over(
            f"{field} of more than {2 * Image.MAX_IMAGE_PIXELS} pixels",
            f"{limits.max_reference_image_size} pixels",
            "--max-reference-image-size",
        )
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
        return None


def decode_video(data: bytes, field: str, limits: Limits, scratch: Path, max_frames: int | None) -> list[Any] | None:
    """The first `max_frames` frames as RGB PIL images, or None when the bytes are not a video."""
    import av

    path = scratch / f"reference-{uuid.uuid4().hex}"
    path.write_bytes(data)
    try:
        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                limits.check_reference(field, stream.codec_context.width, stream.codec_context.height)
        except (av.FFmpegError, IndexError, UnicodeDecodeError):
            return None
        try:
            return media.load_video(path, max_frames=max_frames)
        except MediaError:
            return None
    finally:
        path.unlink(missing_ok=True)
