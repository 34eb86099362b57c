"""Secrets an API document never shows: masked as ``******`` on every path out of the API.

Ironic 39 (``node_sanitize`` in ``ironic/api/controllers/v1/node.py``) masks
``driver_info``, ``instance_info`` and ``driver_internal_info`` with oslo.utils'
``strutils.mask_dict_password``, plus ``driver_info``'s ``snmp_auth_key`` and
``snmp_priv_key`` and ``instance_info``'s ``configdrive`` and ``image_url``.  This
module masks at least that, and what ``mask_dict_password`` misses:

* a value whose key names a secret (:data:`SECRET_KEY_PATTERN`, a superset of oslo's key
  list: ``passwd``, ``pass``, ``pwd``, ``pw``, ``ipmi_kg``, ``ssh_key_contents``,
  ``snmp_community``, ``creds``, ``auth``...), at any depth, in nested objects and in
  lists -- the whole value, an object or a list under such a key too
  (``mask_dict_password`` descends into it);
* the keys the node's driver declares secret (``HardwareType.secret_fields``);
* credentials inside URLs in any string, scheme-relative ones too: ``https://user:pw@host/``
  becomes ``https://user:******@host/`` (``//user:pw@host/``: ``//user:******@host/``), and
  a query parameter whose name says secret, token, key, password, auth, signature... (a
  Swift temp URL's ``temp_url_sig``, S3's ``X-Amz-Signature``, ``?auth=``) keeps its name
  with ``******`` as its value;
* secrets written into free text (``"--password x"``, ``"password=x"``): oslo's own
  ``strutils.mask_password``, the function ``mask_dict_password`` applies to strings.

``None`` and ``""`` are shown as they are (an unset secret tells nothing).  The
documents are walked once; only the objects and lists that change are copied, and a
string is searched only for what could be in it (``://``; a secret's name), so a node
without secrets costs a dictionary walk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from oslo_utils import strutils

from baremetal_service.db.kinds import items_changed

__all__ = [
    "MASK",
    "SECRET_KEY_PATTERN",
    "mask_driver_info",
    "mask_instance_info",
    "mask_json",
    "restore_masked",
]

MASK: Final = "******"

#: A key (lower-cased) whose value is secret when this matches anywhere in it.  Every key of
#: oslo.utils' list contains one of these parts (a test checks it).  ``pass`` is not
#: followed by ``thr`` (``passthru``, ``passthrough`` are not secrets); ``kg`` (IPMI's
#: K_g key), ``psk`` and ``pw`` are whole words; ``auth`` is the whole key or its last
#: word (``bmc_auth``; not ``redfish_auth_type``, ``author``).
SECRET_KEY_PATTERN: Final = re.compile(
    r"pass(?!thr)|pwd|pswd|secret|token|key|cred|community|configdrive|cookie|fsid|hashsuffix|kek"
    r"|(?:^|[_.-])(?:kg|psk|pw)(?:\Z|[_.-])|(?:^|[_.-])auth\Z"
)
#: What free text must contain (lower-cased) before oslo's ``mask_password`` can change it
#: (its keys' parts).  Substring tests: several times faster than one regex on long text.
_TEXT_HINTS: Final = (
    "pass",
    "pswd",
    "secret",
    "token",
    "key",
    "configdrive",
    "cookie",
    "fsid",
    "hashsuffix",
    "kek",
)
#: ``scheme://user:password@`` or scheme-relative ``//user:password@`` (the password is
#: masked; a user name alone is kept).
_URL_PASSWORD: Final = re.compile(r"(?i)((?:\b[a-z][a-z0-9+.-]*:)?//[^/\s:@?#]*:)[^/\s@?#]*@")
#: A URL query parameter whose name says secret: its value is masked.
_URL_SECRET_PARAM: Final = re.compile(
    r"(?i)([?&;][^=&;#\s]*(?:pass|pwd|secret|token|key|cred|sig|auth(?!or))[^=&;#\s]*=)[^&;#\s]*"
)
_MASKED_URL: Final = r"\g<1>" + MASK + "@"
_MASKED_PARAM: Final = r"\g<1>" + MASK

#: key -> whether it names a secret (keys repeat from node to node; bounded)
_secret_keys: dict[str, bool] = {}
_MAX_REMEMBERED_KEYS: Final = 4096


def is_secret_key(key: str) -> bool:
    """Whether *key*'s value is a secret (:data:`SECRET_KEY_PATTERN`)."""
    known = _secret_keys.get(key)
    return _learn(key) if known is None else known


def _learn(key: str) -> bool:
    known = SECRET_KEY_PATTERN.search(key.lower()) is not None
    if len(_secret_keys) >= _MAX_REMEMBERED_KEYS:
        _secret_keys.clear()
    _secret_keys[key] = known
    return known


def _names_a_secret(text: str) -> bool:
    low = text.lower()
    return any(hint in low for hint in _TEXT_HINTS)


def _may_hold_url_secrets(text: str) -> bool:
    """Whether *text* may hold a URL's credentials (``//``) or query parameters (``?``)."""
    return "//" in text or "?" in text


def _masked_text(text: str, texts: list[str] | None) -> str:
    """*text* with URL credentials masked, and oslo's free-text secrets unless *texts* is a
    list (then *text* is added to it: the caller checks them all at once).  The same object
    when nothing is masked."""
    out = text
    if _may_hold_url_secrets(out):
        if "@" in out:
            out = _URL_PASSWORD.sub(_MASKED_URL, out)
        if "=" in out:
            out = _URL_SECRET_PARAM.sub(_MASKED_PARAM, out)
    if texts is not None:
        texts.append(out)
    elif _names_a_secret(out):
        out = strutils.mask_password(out, MASK)
    return text if out == text else out


def _masked(value: Any, texts: list[str] | None) -> Any:
    """*value* with every secret in it masked; the same object when nothing is.  *texts*:
    see :func:`_masked_text`."""
    cls = value.__class__
    if cls is str:
        return _masked_text(value, texts)
    if cls is dict:  # walked here, not by items_changed: the keys decide, and it is the hot path
        out: Any = None
        known = _secret_keys.get
        for key, item in value.items():
            kind = item.__class__
            if item is None or item == "":
                continue
            secret = known(key)
            if secret is None:
                secret = _learn(key)
            if secret:
                new = MASK
            elif kind is str:
                if texts is not None and "//" not in item and "?" not in item:  # (the common case)
                    texts.append(item)
                    continue
                new = _masked_text(item, texts)
            elif kind is dict or kind is list:
                new = _masked(item, texts)
            else:
                continue
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if cls is list:
        return items_changed(value, lambda item: _masked(item, texts))
    return value


def _mask(value: Any) -> Any:
    """*value* with every secret masked: one walk, and free text searched at once (a second
    walk only when some text names a secret, which is rare)."""
    texts: list[str] = []
    if value.__class__ is not dict and isinstance(value, Mapping):
        value = dict(value)
    masked = _masked(value, texts)
    if texts and _names_a_secret("\x00".join(texts)):
        masked = _masked(masked, None)
    return masked


def _with(info: dict[str, Any], original: Mapping[str, Any], keys: Any) -> dict[str, Any]:
    """*info* with *keys* (those set in it) masked: a copy if *info* is *original*."""
    for key in keys:
        if info.get(key) not in (None, "") and info[key] != MASK:
            if info is original:
                info = dict(info)
            info[key] = MASK
    return info


def mask_driver_info(info: Mapping[str, Any], secrets: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``driver_info`` as shown: every secret masked, and the keys *secrets* (the ones the
    node's driver declares)."""
    masked: dict[str, Any] = _mask(info)
    return _with(masked, info, secrets & info.keys()) if secrets else masked


#: ``instance_info`` keys Ironic masks whatever their name says (a Swift temp URL in
#: ``image_url``; ``configdrive`` may be an object).
_INSTANCE_SECRETS: Final = ("configdrive", "image_url")


def mask_instance_info(info: Mapping[str, Any], _secrets: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``instance_info`` as shown: every secret masked, ``configdrive`` and ``image_url`` too."""
    return _with(_mask(info), info, _INSTANCE_SECRETS)


def mask_json(value: Any, _secrets: frozenset[str] = frozenset()) -> Any:
    """Any JSON value as shown (``driver_internal_info``, a volume target's ``properties``,
    deploy template and runbook ``steps``): every secret masked."""
    return _mask(value)


def restore_masked(new: Any, stored: Any, shown: Any) -> Any:
    """*new* (a client's value, from a document it read) with each masked value it sent back
    unchanged replaced by the *stored* one: where *new* equals what the API showed (*shown*,
    the masked *stored*) and that differs from *stored*.  Objects by key, lists by position
    (same length), at any depth; *new* is changed in place and returned."""
    if new == shown and shown != stored:
        return stored
    if new.__class__ is dict and stored.__class__ is dict and shown.__class__ is dict:
        for key, value in new.items():
            if key in stored and key in shown:
                new[key] = restore_masked(value, stored[key], shown[key])
    elif (
        new.__class__ is list
        and stored.__class__ is list
        and shown.__class__ is list
        and len(new) == len(stored) == len(shown)
    ):
        for index, value in enumerate(new):
            new[index] = restore_masked(value, stored[index], shown[index])
    return new
