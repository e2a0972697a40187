"""fsspec URL targets (object stores and any fsspec filesystem): credentials kept out of URLs
and text, the store probed, the run "directory" (a prefix with a marker object) made and
removed."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from ..core.errors import EngineUnavailable, TargetError, quoted
from ..core.redact import ENDPOINT_ENV, redact_text, redact_url, userinfo
from .model import RUN_DIR_PREFIX, Target
from .rundir import remove_at

URL_MARKER = ".iobench-run"  # a small object that makes the run "directory" exist on a store
S3_ENDPOINT_ENV = ENDPOINT_ENV  # IOBENCH_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
PROBE_TIMEOUT_S = 5
# stores whose URLs cannot carry credentials: user information there is a mistake that the
# backend would take for part of the bucket name (and quote back in its error text)
NO_USERINFO = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"}


def scrub(text: str, extra: list[str] | None = None) -> str:
    """``text`` without credentials (see :mod:`iobench.core.redact`), and without ``extra``."""
    out = redact_text(text)
    for value in extra or []:
        if value and len(value) >= 4:
            out = out.replace(value, "***")
    return out


def check_url_credentials(url: str, what: str) -> None:
    """TargetError (exit 2, the URL masked) for credentials no backend can take safely:

    - any user information in an object-store URL (``s3://KEY:SECRET@bucket/...``): s3fs,
      gcsfs and adlfs take credentials from the environment, and would read ``KEY:SECRET@``
      as part of the bucket name and quote it back in their errors;
    - a ``/`` in the user information of any URL (``ftp://user:pa/ss@host``): not a valid URL
      (RFC 3986: percent-encode it as ``%2F``); backends split it at the ``/`` and quote the
      pieces, which no redaction can recognise.
    """
    protocol = url_protocol(url)
    info = userinfo(url)
    if info is None:
        return
    if protocol in NO_USERINFO:
        raise TargetError(
            f"{what} {redact_url(url)} has credentials (or an '@') before the bucket name; "
            f"{protocol}:// URLs take none",
            hint="give them in the environment or the backend's configuration (for S3: "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws), the URL as "
            f"{protocol}://BUCKET/prefix",
        )
    if "/" in info and protocol not in ("memory", "file", "local"):  # paths, not hosts, there
        raise TargetError(
            f"{what} {redact_url(url)} has a '/' in its user name or password",
            hint="percent-encode it there as %2F (and '@' as %40, ':' in the user name as %3A)",
        )


def url_protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def storage_options_from_env(protocol: str, environ: dict[str, str] | None = None) -> dict:
    """fsspec storage options from the environment (never credentials: the backend's own
    chain finds those). S3: endpoint from IOBENCH_S3_ENDPOINT, AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL (MinIO, Ceph RGW, a local moto server)."""
    env = os.environ if environ is None else environ
    if protocol in ("s3", "s3a"):
        endpoint = next((env[k] for k in S3_ENDPOINT_ENV if env.get(k)), None)
        if endpoint:
            return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}


def _endpoint(opts: dict[str, Any]) -> str:
    return str(
        (opts.get("client_kwargs") or {}).get("endpoint_url") or opts.get("endpoint_url") or ""
    )


def url_fs(t: Target) -> tuple[Any, str]:
    """(fsspec filesystem, run-dir path in it) of a URL target (fsspec caches the instance)."""
    from fsspec.core import url_to_fs

    return url_to_fs(t.run_dir or t.root, **t.storage_options)


def _describe_store_error(e: BaseException, where: str, endpoint: str) -> str:
    at = f" at {endpoint}" if endpoint else ""
    if isinstance(e, FileNotFoundError):
        return f"{where} does not exist{at}"
    if isinstance(e, PermissionError):
        return f"access to {where} denied{at} (check the credentials and the bucket policy)"
    detail = quoted(e, 200)
    return f"cannot reach {where}{at}: {type(e).__name__}: {detail}"


def resolve_url(
    url: str, storage_options: dict[str, Any] | None = None, *, what: str = "target"
) -> Target:
    """Check an fsspec URL target: known protocol, backend installed, bucket reachable.

    Writes nothing. Missing bucket, wrong endpoint or unknown protocol: TargetError (exit 2),
    one line, without credentials. ``what`` names it in messages ("target", "dataset").
    """
    import fsspec
    from fsspec.core import url_to_fs

    safe = scrub(url)
    protocol = url_protocol(url)
    check_url_credentials(url, what)
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise TargetError(
            f"unknown protocol {protocol!r} in {what} {safe}",
            hint="give a directory or an fsspec URL such as s3://bucket/prefix or memory://name",
        ) from None
    except ImportError as e:
        hint = (
            "pip install 'iobench[s3]'"
            if protocol in ("s3", "s3a")
            else scrub(str(e)) or f"install the fsspec package for {protocol}://"
        )
        raise EngineUnavailable(
            f"no filesystem package for {protocol}:// URLs", hint=hint
        ) from None
    opts = dict(storage_options_from_env(protocol) if storage_options is None else storage_options)
    endpoint = _endpoint(opts)
    try:
        fs, root = url_to_fs(url, **opts)
    except Exception as e:  # noqa: BLE001 - backends raise what they like on bad options
        raise TargetError(scrub(f"{what} {safe} cannot be opened: {e}")) from None
    _check_url_root(cls, fs, root, opts, f"{what} {safe}", endpoint)
    return Target(
        path_or_url=safe,
        root=fs.unstrip_protocol(root.rstrip("/")),
        fs_type=protocol,
        mount_source=scrub(endpoint),
        direct_io="unsupported",
        direct_reason="fsspec URL target: no O_DIRECT and no client page cache",
        kind="fsspec",
        storage_options=opts,
    )


def _check_url_root(
    cls: Any, fs: Any, root: str, opts: dict[str, Any], where: str, endpoint: str
) -> None:
    """The bucket exists and answers (fast: short timeouts, few retries); the prefix is not
    an object."""
    probe = fs
    if protocol_is_s3(cls):
        cfg = dict(opts.get("config_kwargs") or {})
        cfg.setdefault("connect_timeout", PROBE_TIMEOUT_S)
        cfg.setdefault("read_timeout", PROBE_TIMEOUT_S)
        cfg.setdefault("retries", {"max_attempts": 2})
        probe = cls(**{**opts, "config_kwargs": cfg}, skip_instance_cache=True)
        probe.retries = 2  # s3fs's own retry loop, on top of botocore's
    try:
        if hasattr(probe, "split_path"):
            bucket = probe.split_path(root)[0]
            if not bucket:
                raise TargetError(f"{where} names no bucket", hint="write s3://BUCKET/prefix")
            try:
                probe.info(bucket)
            except FileNotFoundError:
                raise TargetError(
                    f"bucket {bucket!r} does not exist" + (f" at {endpoint}" if endpoint else ""),
                    hint="create it first, or check the URL and IOBENCH_S3_ENDPOINT",
                ) from None
        if probe.isfile(root):
            raise TargetError(
                f"{where} is an object, not a prefix", hint="give a prefix to write under"
            )
    except TargetError as e:
        raise TargetError(scrub(e.message), hint=e.hint) from None
    except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
        raise TargetError(
            scrub(_describe_store_error(e, where, endpoint)),
            hint="check the URL, the endpoint (IOBENCH_S3_ENDPOINT) and the credentials",
        ) from None


def protocol_is_s3(cls: Any) -> bool:
    return getattr(cls, "__module__", "").startswith("s3fs")


def _create_url_run_dir(t: Target, run_id: str) -> str:
    """Create URL/.iobench-<run_id>/ (a marker object in it) on a store; it must not exist."""
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(t.root, **t.storage_options)
    run = root.rstrip("/") + "/" + RUN_DIR_PREFIX + run_id
    url = fs.unstrip_protocol(run)
    try:
        if fs.exists(run):
            raise TargetError(f"run directory {scrub(url)} already exists", hint="use a new run id")
        if not hasattr(fs, "split_path"):  # hierarchical fsspec filesystems need directories
            fs.makedirs(run, exist_ok=True)
        fs.pipe_file(run + "/" + URL_MARKER, run_id.encode())
    except TargetError:
        raise
    except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
        raise TargetError(
            scrub(_describe_store_error(e, f"run directory {url}", _endpoint(t.storage_options))),
            hint="check write permission on the bucket/prefix",
        ) from None
    t.run_dir = url
    t.created = True
    t.direct_io = "unsupported"
    return url


def _remove_url_run_dir(t: Target) -> None:
    """``fs.rm(run_dir, recursive=True)`` of our own run prefix, and nothing else."""
    if not t.created or not t.run_dir:
        return
    fs, run = url_fs(t)
    if not posixpath.basename(run.rstrip("/")).startswith(RUN_DIR_PREFIX):
        return  # paranoia: never remove anything that is not our own run prefix
    try:
        if fs.exists(run):
            fs.rm(run, recursive=True)
        fs.invalidate_cache(run)
        if not fs.exists(run):
            t.created = False
    except Exception as e:  # noqa: BLE001 - cleanup is best effort; say what is left
        t.warnings.append(scrub(f"could not remove {t.run_dir}: {type(e).__name__}: {e}"))


def run_dir_visible(t: Target, run_dir_id: str) -> bool:
    """Whether another run directory ``.iobench-<run_dir_id>`` next to ours is visible here
    (a shared filesystem or store: another rank's files can be read back)."""
    name = RUN_DIR_PREFIX + run_dir_id
    if t.kind == "fsspec":
        fs, run = url_fs(t)
        peer = posixpath.join(posixpath.dirname(run.rstrip("/")), name, URL_MARKER)
        try:
            fs.invalidate_cache(posixpath.dirname(peer))
            return bool(fs.exists(peer))
        except Exception:  # noqa: BLE001 - unreachable or refused: not visible
            return False
    return os.path.isdir(os.path.join(t.root, name))


def remove_sibling_run_dir(t: Target, run_dir_id: str) -> None:
    """Remove ``TARGET/.iobench-<run_dir_id>`` (another rank's run directory of this same run)
    where this host sees it. Best effort; nothing else is touched."""
    name = RUN_DIR_PREFIX + run_dir_id
    if os.sep in name or "/" in name or name in (".", ".."):
        return
    if t.kind == "fsspec":
        try:
            fs, run = url_fs(t)
            peer = posixpath.join(posixpath.dirname(run.rstrip("/")), name)
            fs.invalidate_cache(peer)
            if fs.exists(peer):
                fs.rm(peer, recursive=True)
        except Exception:  # noqa: BLE001 - best effort
            pass
        return
    # relative to the target directory this run holds open (``RunDir``), not its name: a
    # target renamed or swapped for a link meanwhile never leads the removal elsewhere
    if t.handle is not None:
        remove_at(t.handle.root_fd, name, os.path.join(t.root, name))
