"""WSGI plumbing the middlewares share: how one calls the app it wraps."""

from __future__ import annotations

from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication


def direct_call(app: WSGIApplication) -> WSGIApplication:
    """*app*, or its bound ``__call__`` when it is an instance of a Python class (another
    middleware): calling the instance goes through ``type.__call__``'s slot (an argument
    tuple and a method lookup per call), the bound method is a direct call.

    Bound when the app is set: a middleware keeps ``app`` replaceable by binding again in
    its ``app`` setter.
    """
    call: Any = type(app).__call__
    if isinstance(call, FunctionType):
        return MethodType(call, app)
    return app
