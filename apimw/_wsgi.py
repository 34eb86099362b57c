"""WSGI plumbing the middlewares share: how one calls the app it wraps."""

from __future__ import annotations

from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any, overload

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


class WrappedApp:
    """A middleware's ``app`` attribute: the WSGI app it wraps, replaceable.  Setting it also
    binds ``_call_app`` (:func:`direct_call`), which the middleware calls on its hot path.

    The app is kept in the instance's ``_app``; a class may also name this descriptor ``_app``
    (an older name), which then reads and sets the same app.
    """

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> WrappedApp: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> WSGIApplication: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__["_app"]

    def __set__(self, obj: object, app: WSGIApplication) -> None:
        obj.__dict__["_app"] = app
        obj.__dict__["_call_app"] = direct_call(app)
