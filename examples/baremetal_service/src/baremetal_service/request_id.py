"""``x-openstack-request-id`` on every answer: oslo.middleware's ``RequestId``, without webob.

What oslo.middleware's ``request_id`` filter does, as a plain WSGI middleware:

* a new ``req-<uuid4>`` for each request, in ``environ["openstack.request_id"]`` (the error
  bodies and the logs quote it) and in the ``x-openstack-request-id`` response header,
  unless the application already set that header;
* an inbound ``X-OpenStack-Request-Id`` of the same form is kept as
  ``environ["openstack.global_request_id"]`` (anything else is ignored).

oslo's version builds a webob ``Request`` and ``Response`` around every request (about
60 µs of a ~650 µs GET in this service, measured in-process; docs/performance.md); this one
wraps ``start_response``.  The in-code stack (:func:`baremetal_service.app.wrap`) uses this
one by default; ``request_id="oslo"`` there (``BAREMETAL_REQUEST_ID=oslo``) selects
oslo.middleware's, and so does ``use = egg:oslo.middleware#request_id`` in api-paste.ini.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ENV_REQUEST_ID: Final = "openstack.request_id"
ENV_GLOBAL_REQUEST_ID: Final = "openstack.global_request_id"
HEADER: Final = "x-openstack-request-id"
#: oslo.middleware's accepted form of an inbound global request id.
_GLOBAL_ID: Final = re.compile(
    r"req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"
).fullmatch


class RequestIdMiddleware:
    """Give each request an id, in the environ and in the ``x-openstack-request-id`` header."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        inbound = environ.get("HTTP_X_OPENSTACK_REQUEST_ID")
        if inbound and _GLOBAL_ID(inbound):
            environ[ENV_GLOBAL_REQUEST_ID] = inbound
        req_id = "req-" + str(uuid.uuid4())
        environ[ENV_REQUEST_ID] = req_id

        def add_header(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            for name, _value in headers:
                if name.lower() == HEADER:
                    break
            else:
                headers = [*headers, (HEADER, req_id)]
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        return self.app(environ, add_header)


def filter_factory(global_conf: Mapping[str, Any], **local_conf: str) -> Any:
    """paste.deploy filter factory: ``paste.filter_factory = baremetal_service.request_id:filter_factory``."""
    return RequestIdMiddleware
