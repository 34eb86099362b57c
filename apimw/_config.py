"""One option table per middleware, and the three ways to configure it.

Each middleware module declares ``OPTIONS: tuple[Option, ...]``.  From that one
table come:

* the paste.deploy ``filter_factory`` (ini strings converted and validated;
  a bad value raises :class:`~apimw.errors.ConfigError` at pipeline load),
* the oslo.config ``OPTS`` list (and ``list_opts`` for oslo-config-generator),
* the Flask wrapper, which reads ``app.config["APIMW_<MIDDLEWARE>"]``.

Precedence, highest first: keyword arguments given in code, paste ini keys,
oslo.config values (only when the ini names ``oslo_config_project`` and/or
``oslo_config_file``), the option's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from apimw.errors import ConfigError

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


def oslo_opts(options: Sequence[Option]) -> list[Any]:
    """oslo.config ``Opt`` objects for *options* (imports oslo.config lazily)."""
    from oslo_config import cfg

    makers: dict[str, Callable[..., Any]] = {
        "str": cfg.StrOpt,
        "bool": cfg.BoolOpt,
        "int": cfg.IntOpt,
        "float": cfg.FloatOpt,
        "list": cfg.ListOpt,
    }
    opts = []
    for opt in options:
        default = opt.default
        if opt.kind == "str" and default is not None and not isinstance(default, str):
            default = str(default)
        opts.append(makers[opt.kind](opt.name, default=default, help=opt.help, secret=opt.secret))
    return opts


def from_oslo(options: Sequence[Option], conf: Any, group: str) -> dict[str, Any]:
    """Values set in oslo.config *group* (those differing from the default), converted."""
    conf.register_opts(oslo_opts(options), group=group)
    section = getattr(conf, group)
    kwargs: dict[str, Any] = {}
    for opt in options:
        value = getattr(section, opt.name)
        if value is None or value == opt.default:
            continue
        kwargs[opt.name] = opt.convert(value) if isinstance(value, str) else value
    return kwargs


def paste_section(global_conf: Mapping[str, Any], local_conf: Mapping[str, Any], group: str) -> str:
    """Where a paste filter's settings came from, for error messages: ``[filter:<name>] in <file>``.

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
        return fallback
    import configparser

    parser = configparser.RawConfigParser(strict=False, default_section="\x00none")
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        with open(path, encoding="utf-8") as fh:  # noqa: PTH123 - a path from paste.deploy
            parser.read_file(fh)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return f"{fallback} in {path}"
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
            found.append(section)
    if len(found) == 1:
        return f"[{found[0]}] in {path}"
    return f"{fallback} in {path}"


def make_filter_factory(
    factory: Callable[..., WSGIApplication], options: Sequence[Option], group: str
) -> Callable[..., Callable[[WSGIApplication], WSGIApplication]]:
    """A paste.deploy ``filter_factory`` for ``factory(app, **kwargs)``."""

    def filter_factory(
        global_conf: Mapping[str, Any], **local_conf: str
    ) -> Callable[[WSGIApplication], WSGIApplication]:
        local = dict(local_conf)
        project = local.pop("oslo_config_project", None)
        config_file = local.pop("oslo_config_file", None)
        kwargs: dict[str, Any] = {}
        if project or config_file:
            from oslo_config import cfg

            conf = cfg.ConfigOpts()
            args = ["--config-file", config_file] if config_file else []
            conf(args, project=project, validate_default_values=True)
            kwargs.update(from_oslo(options, conf, group))
        where = paste_section(global_conf, local, group)
        kwargs.update(convert_strings(options, local, where=where))
        check_required(options, kwargs, where=where)

        def _filter(app: WSGIApplication) -> WSGIApplication:
            # paste calls this while loading the pipeline: a bad value fails there.
            try:
                return factory(app, **kwargs)
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None

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
    from apimw.errors import HTTPProblem, flask_problem_handler

    flask_app.register_error_handler(HTTPProblem, flask_problem_handler)
    flask_app.wsgi_app = factory(flask_app.wsgi_app, **kwargs)
    return flask_app


def options_table(options: Sequence[Option], group: str) -> str:
    """A Markdown table of *options* (for the configuration docs)."""
    rows = ["| option | default | oslo.config group | description |", "|---|---|---|---|"]
    for opt in options:
        rows.append(f"| `{opt.name}` | `{opt.default!r}` | `[{group}]` | {opt.help} |")
    return "\n".join(rows)
