"""One option table per middleware, and the three ways to configure it.

Each middleware module declares ``OPTIONS: tuple[Option, ...]``.  From that one
table come:

* the paste.deploy ``filter_factory`` (ini strings converted and validated;
  a bad value raises :class:`~apimw.errors.ConfigError` at pipeline load),
* the oslo.config ``OPTS`` list (and ``list_opts`` for oslo-config-generator),
* the Flask wrapper, which reads ``app.config["APIMW_<MIDDLEWARE>"]``,
* the oslo.config hook ``oslo_hook(app) -> app`` for a host service's middleware hook
  (OpenStack Ironic's ``[api] middleware``): options read from the host's global
  ``cfg.CONF``, so every ``--config-file`` and ``--config-dir`` it was started with counts.

:func:`integration` declares those four once; each middleware module ends with::

    GROUP: Final = "apimw_<middleware>"
    OPTIONS: Final = (...)
    filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(Middleware, OPTIONS, GROUP)

Precedence, highest first: keyword arguments given in code, paste ini keys (the
filter's own section over the global conf: ``[DEFAULT]``, ``set`` lines, the loader's
``global_conf``; only this middleware's option names are read from it), oslo.config
values (only when the ini names ``oslo_config_project`` and/or ``oslo_config_file``),
the option's default.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from apimw.errors import ConfigError, HTTPProblem, MissingExtraError, explain_missing, flask_problem_handler

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

_NO_DEFAULT: Any = object()


class Option(NamedTuple):  # not a dataclass: importing dataclasses costs milliseconds
    """One middleware option: its keyword name, how to read it from a string, its default."""

    name: str
    convert: Callable[[str], Any]
    default: Any
    help: str
    #: oslo.config type: "str", "bool", "int", "float", "list"
    kind: str = "str"
    #: must be given (in code, ini, oslo.config or Flask config)
    required: bool = False
    #: a secret (or a value that may carry one, like a store URL with a password): oslo.config
    #: masks it when it logs option values, and apimw never echoes it in an error
    secret: bool = False
    #: offered in oslo.config; False for an option naming code to import (``module:function``),
    #: which a deployment's configuration files should not choose: code or paste only
    oslo: bool = True


def option_docs(options: Sequence[Option], group: str) -> str:
    """The ``help()`` text of every option in *options*, appended to both doors' middleware
    docstrings (so ``help()`` and the generated reference show each option, from this one
    table): each option's name, ``required`` or its default, and its help."""
    flask_key = "APIMW_" + group.removeprefix("apimw_").upper()
    lines = [
        "",
        f"    Keyword options (the paste.deploy ini keys, the oslo.config options of group ``{group}``",
        f"    and the Flask ``{flask_key}`` keys have the same names; a list option also takes a string",
        "    of comma or newline separated items, as an ini value is read):",
        "",
    ]
    for option in options:
        default = "required" if option.required else f"default ``{option.default!r}``"
        lines.append(f"    ``{option.name}`` ({default})")
        lines.extend(textwrap.wrap(option.help, 88, initial_indent=" " * 8, subsequent_indent=" " * 8,
                                   break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines) + "\n"


def check_required(options: Sequence[Option], kwargs: Mapping[str, Any], *, where: str) -> None:
    missing = [opt.name for opt in options if opt.required and kwargs.get(opt.name) is None]
    if missing:
        raise ConfigError(f"{where}: missing required option(s): {', '.join(missing)}")


# -- string converters (paste ini values and oslo.config strings) -------------------------

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def as_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"expected a boolean (true/false), got {value!r}")


def as_int(value: str | int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if not text.lstrip("-").isdigit() or not text.isascii():
        raise ConfigError(f"expected an integer, got {value!r}")
    return int(text)


def as_float(value: str | float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigError(f"expected a number, got {value!r}") from None


def as_list(value: str | Iterable[str]) -> list[str]:
    if isinstance(value, str):
        return [item.strip() for item in value.replace("\n", ",").split(",") if item.strip()]
    return [str(item) for item in value]


def import_named(text: str, *, option: str) -> Any:
    """The object that ``package.module:attribute`` names (the attribute may be dotted): how
    every option naming code (a callable, a metrics object, a scope function) is read from a
    paste ini, oslo.config or Flask.  :class:`ConfigError` naming *option* when it names nothing."""
    module_name, sep, attr = text.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{option}: expected 'package.module:attribute', got {text!r}")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except MissingExtraError:
        raise  # already one line naming the extra to install
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{option}: cannot import {text!r}: {exc}") from None
    return found


def as_str(value: str) -> str:
    return str(value).strip()


def as_optional_str(value: str | None) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


# -- building keyword arguments ------------------------------------------------------------


def _index(options: Sequence[Option]) -> dict[str, Option]:
    return {opt.name: opt for opt in options}


def convert_strings(options: Sequence[Option], conf: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """Convert string settings (paste ini / Flask) to keyword arguments; unknown keys fail."""
    table = _index(options)
    kwargs: dict[str, Any] = {}
    for key, raw in conf.items():
        opt = table.get(key)
        if opt is None:
            known = ", ".join(sorted(table))
            raise ConfigError(f"{where}: unknown option {key!r} (known: {known})")
        try:
            kwargs[key] = opt.convert(raw) if isinstance(raw, str) else raw
        except ConfigError as exc:
            reason = "bad value (not shown: the option is secret)" if opt.secret else str(exc)
            raise ConfigError(f"{where}: option {key!r}: {reason}") from None
    return kwargs


def oslo_config() -> Any:
    """``oslo_config.cfg`` (an optional extra), imported when oslo.config is first used."""
    try:
        from oslo_config import cfg  # extra "oslo": apimw imports without it
    except ImportError as exc:
        explain_missing(exc, "oslo.config support", module="oslo_config", library="oslo.config", extra="oslo")
        raise
    return cfg


def oslo_opts(options: Sequence[Option]) -> list[Any]:
    """oslo.config ``Opt`` objects for *options* (imports oslo.config lazily)."""
    cfg = oslo_config()

    makers: dict[str, Callable[..., Any]] = {
        "str": cfg.StrOpt,
        "bool": cfg.BoolOpt,
        "int": cfg.IntOpt,
        "float": cfg.FloatOpt,
        "list": cfg.ListOpt,
    }
    opts = []
    for opt in options:
        if not opt.oslo:
            continue
        default = opt.default
        if opt.kind == "str" and default is not None and not isinstance(default, str):
            default = str(default)
        opts.append(makers[opt.kind](opt.name, default=default, help=opt.help, secret=opt.secret))
    return opts


def from_oslo(options: Sequence[Option], conf: Any, group: str) -> dict[str, Any]:
    """Values set in oslo.config *group* (those differing from the default), converted."""
    cfg = oslo_config()

    for oslo_opt in oslo_opts(options):
        # registered once: when the host registered the option already, its definition is kept
        with contextlib.suppress(cfg.DuplicateOptError):
            conf.register_opt(oslo_opt, group=group)
    section = getattr(conf, group)
    kwargs: dict[str, Any] = {}
    for opt in options:
        if not opt.oslo:
            continue
        value = getattr(section, opt.name)
        if value is None or value == opt.default:
            continue
        kwargs[opt.name] = opt.convert(value) if isinstance(value, str) else value
    return kwargs


class _PasteIni(NamedTuple):
    """The ini a paste filter came from, as far as it can be found (for messages and checks)."""

    #: ``[filter:<name>] in <file>``, or the filter's ``use`` line when the section is not known
    where: str
    #: the raw ``key = value`` lines of the filter's own section (empty when not known)
    own: Mapping[str, str]


def paste_ini(global_conf: Mapping[str, Any], local_conf: Mapping[str, Any], group: str) -> _PasteIni:
    """Where a paste filter's settings came from: ``[filter:<name>] in <file>`` and its own lines.

    paste.deploy gives a ``filter_factory`` the settings of its section but not the
    section's name; the name is found by reading the ini (``global_conf["__file__"]``)
    for the ``[filter:...]`` sections that use this filter (``egg:apimw#<name>`` or
    ``apimw.<name>:filter_factory``) and hold these keys.  When that is not one section,
    the message names the filter by its ``use`` line instead.
    """
    entry = group.removeprefix("apimw_")
    fallback = f"the paste filter using egg:apimw#{entry}"
    path = global_conf.get("__file__") if isinstance(global_conf, Mapping) else None
    if not path:
        return _PasteIni(fallback, {})
    parser = configparser.RawConfigParser(strict=False, default_section="\x00none")
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        with open(path, encoding="utf-8") as fh:  # noqa: PTH123 - a path from paste.deploy
            parser.read_file(fh)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return _PasteIni(f"{fallback} in {path}", {})
    uses = {f"egg:apimw#{entry}", f"egg:apimw#apimw.{entry}", f"call:apimw.{entry}:filter_factory"}
    found = []
    for section in parser.sections():
        if not section.startswith(("filter:", "filter-app:")):
            continue
        items = dict(parser.items(section))
        use = items.get("use", "").strip()
        factory = items.get("paste.filter_factory", "").strip()
        if use not in uses and factory != f"apimw.{entry}:filter_factory":
            continue
        if set(local_conf) <= set(items):
            found.append((section, items))
    if len(found) == 1:
        section, items = found[0]
        return _PasteIni(f"[{section}] in {path}", items)
    return _PasteIni(f"{fallback} in {path}", {})


def _check_not_hidden(ini: _PasteIni, options: Sequence[Option], global_conf: Mapping[str, Any]) -> None:
    """Refuse a filter line that paste.deploy dropped in favour of a different global value.

    paste.deploy leaves out of a section's settings every key that ``[DEFAULT]`` (or the
    loader's ``global_conf``) also names, whatever the section says: ``store = redis://...``
    under ``[DEFAULT] store = memory://`` would be silently replaced by memory://.
    ``store = %(store)s`` (the same value) is fine.  Values are never shown (they may be secret).
    """
    table = _index(options)
    defaults = {str(k): str(v) for k, v in global_conf.items()}
    for key, raw in ini.own.items():
        if key not in table or key not in global_conf or raw.strip() == f"%({key})s":
            continue
        interpolation = configparser.BasicInterpolation()
        try:
            value = interpolation.before_get(
                configparser.RawConfigParser(defaults=defaults), "DEFAULT", key, raw, defaults
            )
        except (configparser.Error, ValueError):
            continue  # cannot tell: leave it to paste.deploy's value
        if value.strip() != str(global_conf[key]).strip():
            raise ConfigError(
                f"{ini.where}: its {key!r} line is not used: paste.deploy gives every section the "
                f"global {key!r} ([DEFAULT] or the loader's global_conf) instead of the section's own. "
                f"Override it in this section with 'set {key} = ...', or leave {key} out of [DEFAULT]"
            )


def make_filter_factory(
    factory: Callable[..., WSGIApplication], options: Sequence[Option], group: str
) -> Callable[..., Callable[[WSGIApplication], WSGIApplication]]:
    """A paste.deploy ``filter_factory`` for ``factory(app, **kwargs)``.

    The paste convention: the global conf (``[DEFAULT]``, ``set`` lines, the loader's
    ``global_conf``), then the filter's own settings over it.  Of the global conf only
    this middleware's option names are read (``here``, ``__file__``, ``database`` ... are
    not options); ``oslo_config_project`` / ``oslo_config_file`` are read from the
    filter's section only, and the values they point to come below both.
    """
    table = _index(options)

    def filter_factory(
        global_conf: Mapping[str, Any], **local_conf: str
    ) -> Callable[[WSGIApplication], WSGIApplication]:
        local = dict(local_conf)
        project = local.pop("oslo_config_project", None)
        config_file = local.pop("oslo_config_file", None)
        kwargs: dict[str, Any] = {}
        if project or config_file:
            cfg = oslo_config()

            conf = cfg.ConfigOpts()
            args = ["--config-file", config_file] if config_file else []
            conf(args, project=project, validate_default_values=True)
            kwargs.update(from_oslo(options, conf, group))
        global_conf = global_conf if isinstance(global_conf, Mapping) else {}
        ini = paste_ini(global_conf, local, group)
        _check_not_hidden(ini, options, global_conf)
        inherited = {key: value for key, value in global_conf.items() if key in table and key not in local}
        from_global = f"{ini.where} (from [DEFAULT] or a 'set' line)"
        kwargs.update(convert_strings(options, inherited, where=from_global))
        kwargs.update(convert_strings(options, local, where=ini.where))
        check_required(options, kwargs, where=ini.where)

        def _filter(app: WSGIApplication) -> WSGIApplication:
            # paste calls this while loading the pipeline: a bad value fails there.
            try:
                return factory(app, **kwargs)
            except ConfigError as exc:
                raise ConfigError(f"{ini.where}: {exc}") from None

        return _filter

    return filter_factory


def flask_wrap(
    flask_app: Any,
    factory: Callable[..., WSGIApplication],
    options: Sequence[Option],
    config_key: str,
    overrides: Mapping[str, Any],
) -> Any:
    """Wrap ``flask_app.wsgi_app``; settings from ``flask_app.config[config_key]`` then *overrides*."""
    conf = dict(flask_app.config.get(config_key) or {})
    kwargs = convert_strings(options, conf, where=f"app.config[{config_key!r}]")
    kwargs.update(overrides)
    check_required(options, kwargs, where=f"app.config[{config_key!r}]")
    flask_app.register_error_handler(HTTPProblem, flask_problem_handler)
    flask_app.wsgi_app = factory(flask_app.wsgi_app, **kwargs)
    return flask_app


def options_table(options: Sequence[Option], group: str) -> str:
    """A Markdown table of *options* (for the configuration docs)."""
    rows = ["| option | default | oslo.config group | description |", "|---|---|---|---|"]
    for opt in options:
        default = "**required**" if opt.required else f"`{opt.default!r}`"
        rows.append(f"| `{opt.name}` | {default} | `[{group}]` | {opt.help} |")
    return "\n".join(rows)


def oslo_hook_for(
    factory: Callable[..., WSGIApplication], options: Sequence[Option], group: str
) -> Callable[[WSGIApplication], WSGIApplication]:
    """``hook(app) -> app``: *factory* configured from the host's global ``oslo_config.cfg.CONF``."""

    def oslo_hook(app: WSGIApplication) -> WSGIApplication:
        cfg = oslo_config()

        where = f"oslo.config [{group}]"
        kwargs = from_oslo(options, cfg.CONF, group)
        check_required(options, kwargs, where=where)
        try:
            return factory(app, **kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    oslo_hook.__doc__ = (
        f"Wrap *app* with options from ``[{group}]`` of the host's ``oslo_config.cfg.CONF``\n"
        "(registered there on first use), for a service's middleware hook ``plugin(app) -> app``."
    )
    return oslo_hook


class Integration(NamedTuple):
    """The four ways a middleware is configured outside code, made by :func:`integration`."""

    #: paste.deploy ``filter_factory(global_conf, **local_conf)``
    filter_factory: Callable[..., Callable[[WSGIApplication], WSGIApplication]]
    #: ``wrap_flask(flask_app, **overrides)``: settings from ``app.config["APIMW_<NAME>"]``
    wrap_flask: Callable[..., Any]
    #: oslo-config-generator hook: ``[(group, [Opt, ...])]``
    list_opts: Callable[[], list[tuple[str, list[Any]]]]
    #: ``oslo_hook(app) -> app``: options from the host's global ``cfg.CONF`` under the group
    oslo_hook: Callable[[WSGIApplication], WSGIApplication]
    #: the module's ``__getattr__``: ``OPTS``, the oslo.config options, built on first use so
    #: that oslo.config stays optional
    module_getattr: Callable[[str], Any]


def integration(
    factory: Callable[..., WSGIApplication], options: Sequence[Option], group: str
) -> Integration:
    """The integration tail of one middleware: paste, Flask, oslo-config-generator, oslo hook.

    *group* is the oslo.config group (``apimw_<name>``); the Flask config key is
    ``APIMW_<NAME>`` and the paste entry point ``egg:apimw#<name>``.
    """
    config_key = "APIMW_" + group.removeprefix("apimw_").upper()

    def wrap_flask(flask_app: Any, **overrides: Any) -> Any:
        return flask_wrap(flask_app, factory, options, config_key, overrides)

    wrap_flask.__doc__ = (
        f"Wrap ``flask_app.wsgi_app``; settings from ``app.config[{config_key!r}]`` "
        "(a dict of option names), then *overrides*."
    )

    def list_opts() -> list[tuple[str, list[Any]]]:
        return [(group, oslo_opts(options))]

    list_opts.__doc__ = f"oslo-config-generator hook: ``[({group!r}, [Opt, ...])]``."
    module = "apimw." + group.removeprefix("apimw_")

    def module_getattr(name: str) -> Any:
        if name == "OPTS":
            return list_opts()[0][1]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return Integration(
        make_filter_factory(factory, options, group),
        wrap_flask,
        list_opts,
        oslo_hook_for(factory, options, group),
        module_getattr,
    )
