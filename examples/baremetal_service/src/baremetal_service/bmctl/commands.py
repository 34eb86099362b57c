"""bmctl's commands: nodes (CRUD, provision verbs, power, maintenance), ports, port groups,
chassis and resource classes.  Output (table, json, yaml, csv, value; ``-c``) comes from cliff."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cliff.command import Command
from cliff.lister import Lister
from cliff.show import ShowOne

from apimw.client_resources import Resource, ResourceManager
from baremetal_service.bmctl.client import POWER_TARGETS, VERB_TARGETS, BaremetalClient, Progress

#: ``--etag`` without a value: read the resource first and send the etag it was read with.
READ_FIRST: Final = "\x00read-first"
#: Link fields left out of ``show`` (as the openstack CLI does).
_LINK_FIELDS: Final = frozenset({"links", "ports", "portgroups", "states", "volume", "nodes"})


class CommandError(Exception):
    """A user error found by bmctl itself (cliff prints its message on one line)."""


# -- helpers ----------------------------------------------------------------------------


def _value(text: str) -> Any:
    """``8`` -> 8, ``true`` -> True, ``{"a": 1}`` -> a dict; anything else stays a string,
    and so does what Python's json reads but no JSON body can carry (``NaN``, ``Infinity``,
    ``1e400``)."""
    try:
        value = json.loads(text)
        json.dumps(value, allow_nan=False)
    except ValueError:
        return text
    return value


def seconds(text: str, *, zero: bool = True, what: str = "") -> float:
    """A finite number of seconds, >= 0 (> 0 unless *zero*); else an argument error (*what*
    names where the text came from)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        expected = "a number of seconds >= 0" if zero else "a positive number of seconds"
        raise argparse.ArgumentTypeError(f"expected {expected}{what}, got {text!r}")
    return value


def _pairs(items: Iterable[str] | None, option: str) -> list[tuple[str, Any]]:
    out = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{option} takes <key=value>, got {item!r}")
        out.append((key, _value(value)))
    return out


def _pointer(*parts: str) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def show_columns(resource: Resource) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    data = {k: v for k, v in resource.to_dict().items() if k not in _LINK_FIELDS}
    if resource.etag and "etag" not in data:
        data["etag"] = resource.etag
    names = tuple(sorted(data))
    return names, tuple(data[n] for n in names)


def add_etag_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--etag", nargs="?", const=READ_FIRST, default=None, metavar="<etag>",
        help="Only if the resource still has this etag (sent as If-Match; 412 otherwise). Without a "
             "value: read the resource first and send its etag, so the change applies only to the "
             "state it was computed against. Needs microversion 1.116.")


@dataclass(frozen=True)
class Spec:
    """One resource type's commands: its manager, list columns and settable fields."""

    manager: str
    kind: str
    list_columns: tuple[tuple[str, str], ...]
    simple: tuple[tuple[str, str], ...] = ()  # (--option, field) set as a string
    dicts: tuple[tuple[str, str], ...] = ()  # (--option, field) set as <key=value>, unset by <key>
    create_required: tuple[str, ...] = ()  # options required on create
    create_positional: str | None = None  # a field given as a positional argument on create
    create_only: tuple[tuple[str, str], ...] = ()
    list_filters: tuple[tuple[str, str], ...] = ()  # (--option, query parameter)
    flags: tuple[tuple[str, str, str], ...] = field(default=())  # (--option, --no-option, field)
    plural: str = ""

    @property
    def many(self) -> str:
        return self.plural or f"{self.kind}s"


NODE: Final = Spec(
    "nodes", "node",
    (("UUID", "uuid"), ("Name", "name"), ("Instance UUID", "instance_uuid"), ("Power State", "power_state"),
     ("Provisioning State", "provision_state"), ("Maintenance", "maintenance")),
    simple=(("--name", "name"), ("--driver", "driver"), ("--description", "description"),
            ("--resource-class", "resource_class"), ("--chassis-uuid", "chassis_uuid"), ("--owner", "owner")),
    dicts=(("--property", "properties"), ("--extra", "extra"), ("--driver-info", "driver_info"),
           ("--instance-info", "instance_info")),
    create_required=("--driver",),
    create_only=(("--uuid", "uuid"),),
    list_filters=(("--provision-state", "provision_state"), ("--driver", "driver"),
                  ("--resource-class", "resource_class"), ("--owner", "owner")),
)
PORT: Final = Spec(
    "ports", "port", (("UUID", "uuid"), ("Address", "address")),
    simple=(("--address", "address"), ("--node", "node_uuid"), ("--port-group", "portgroup_uuid"),
            ("--name", "name"), ("--description", "description")),
    dicts=(("--extra", "extra"), ("--local-link-connection", "local_link_connection")),
    create_required=("--node",), create_positional="address",
    list_filters=(("--node", "node"), ("--address", "address")),
    flags=(("--pxe-enabled", "--no-pxe-enabled", "pxe_enabled"),),
)
PORTGROUP: Final = Spec(
    "portgroups", "port group", (("UUID", "uuid"), ("Address", "address"), ("Name", "name")),
    simple=(("--node", "node_uuid"), ("--address", "address"), ("--name", "name"), ("--mode", "mode")),
    dicts=(("--extra", "extra"), ("--property", "properties")),
    create_required=("--node",),
    list_filters=(("--node", "node"), ("--address", "address")),
)
CHASSIS: Final = Spec(
    "chassis", "chassis", (("UUID", "uuid"), ("Description", "description")),
    simple=(("--description", "description"),), dicts=(("--extra", "extra"),), plural="chassis",
)


def _opt_dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


class _Base(Command):
    spec: Spec = NODE

    @property
    def client(self) -> BaremetalClient:
        return self.app.client  # type: ignore[attr-defined,no-any-return]

    @property
    def manager(self) -> ResourceManager[Resource]:
        return getattr(self.client, self.spec.manager)  # type: ignore[no-any-return]


def _patch_from(spec: Spec, args: argparse.Namespace, *, unset: bool) -> list[dict[str, Any]]:
    patch: list[dict[str, Any]] = []
    for option, name in spec.simple:
        given = getattr(args, _opt_dest(option))
        if unset and given:
            patch.append({"op": "remove", "path": _pointer(name)})
        elif not unset and given is not None:
            patch.append({"op": "add", "path": _pointer(name), "value": given})
    for option, name in spec.dicts:
        items = getattr(args, _opt_dest(option)) or []
        if unset:
            patch.extend({"op": "remove", "path": _pointer(name, key)} for key in items)
        else:
            patch.extend({"op": "add", "path": _pointer(name, k), "value": v}
                         for k, v in _pairs(items, option))
    for on, _off, name in spec.flags:
        value = getattr(args, name, None)
        if unset and getattr(args, _opt_dest(on), False):
            patch.append({"op": "remove", "path": _pointer(name)})
        elif not unset and value is not None:
            patch.append({"op": "add", "path": _pointer(name), "value": value})
    return patch


# -- generic CRUD -----------------------------------------------------------------------


class ListCommand(_Base, Lister):
    """List resources."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--long", action="store_true", help="Every field (the /detail list).")
        parser.add_argument("--fields", nargs="+", metavar="<field>", help="Only these fields.")
        parser.add_argument("--limit", type=int, metavar="<n>", help="At most <n> resources.")
        parser.add_argument("--sort", metavar="<key>[:<dir>]", help="Sort key and direction (asc, desc).")
        for option, _param in self.spec.list_filters:
            parser.add_argument(option, metavar="<value>", help=f"Only {self.spec.many} with this value.")
        if self.spec is NODE:
            group = parser.add_mutually_exclusive_group()
            group.add_argument("--maintenance", dest="maintenance", action="store_true", default=None,
                               help="Only nodes in maintenance.")
            group.add_argument("--no-maintenance", dest="maintenance", action="store_false",
                               help="Only nodes not in maintenance.")
        return parser

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        params: dict[str, Any] = {}
        for option, param in self.spec.list_filters:
            params[param] = getattr(args, _opt_dest(option))
        if self.spec is NODE:
            params["maintenance"] = args.maintenance
        if args.sort:
            key, _, direction = args.sort.partition(":")
            params["sort_key"] = key
            if direction:
                params["sort_dir"] = direction
        if args.fields:
            params["fields"] = args.fields
        items = self.manager.list(limit=args.limit, detail=bool(args.long and not args.fields), **params)
        if args.fields:
            columns = tuple(args.fields)
            names = columns
        elif args.long:
            keys = sorted({k for item in items for k in item.to_dict() if k not in _LINK_FIELDS})
            columns = names = tuple(keys)
        else:
            names = tuple(c[0] for c in self.spec.list_columns)
            columns = tuple(c[1] for c in self.spec.list_columns)
        return names, [tuple(item.get(c) for c in columns) for item in items]


class ShowCommand(_Base, ShowOne):
    """Show one resource, with its etag."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("ident", metavar=f"<{self.spec.kind.replace(' ', '-')}>",
                            help="UUID" + (" or name" if self.spec is NODE else ""))
        parser.add_argument("--fields", nargs="+", metavar="<field>", help="Only these fields.")
        return parser

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Sequence[Any]]:
        return show_columns(self.manager.get(args.ident, fields=args.fields))


class CreateCommand(_Base, ShowOne):
    """Create a resource; the POST carries a client token (automatic, or --client-token)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        if self.spec.create_positional:
            parser.add_argument(self.spec.create_positional, metavar=f"<{self.spec.create_positional}>")
        for option, name in (*self.spec.simple, *self.spec.create_only):
            if self.spec.create_positional == name:
                continue
            parser.add_argument(option, metavar=f"<{name}>", required=option in self.spec.create_required)
        for option, name in self.spec.dicts:
            parser.add_argument(option, action="append", metavar="<key=value>",
                                help=f"A key of {name} (repeat; values are JSON when they parse).")
        for on, off, name in self.spec.flags:
            parser.add_argument(on, dest=name, action="store_true", default=None)
            parser.add_argument(off, dest=name, action="store_false")
        tokens = parser.add_mutually_exclusive_group()
        tokens.add_argument(
            "--client-token", metavar="<token>",
            help="X-Client-Token of this create: run the same command again with the same token and the "
                 "server answers with the resource made the first time (default: a new token each run).")
        tokens.add_argument("--no-client-token", action="store_true", help="Send no client token.")
        return parser

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Sequence[Any]]:
        if args.client_token is not None and not args.client_token.strip():
            raise CommandError("--client-token must not be empty (leave it out for a new token per create)")
        body: dict[str, Any] = {}
        if self.spec.create_positional:
            body[self.spec.create_positional] = getattr(args, self.spec.create_positional)
        for option, name in (*self.spec.simple, *self.spec.create_only):
            value = getattr(args, _opt_dest(option), None)
            if value is not None and name != self.spec.create_positional:
                body[name] = value
        for option, name in self.spec.dicts:
            pairs = _pairs(getattr(args, _opt_dest(option)), option)
            if pairs:
                body[name] = dict(pairs)
        for _on, _off, name in self.spec.flags:
            if getattr(args, name) is not None:
                body[name] = getattr(args, name)
        if args.no_client_token:
            resource = self.manager.create(body, client_token=None)
        elif args.client_token is not None:
            resource = self.manager.create(body, client_token=args.client_token)
        else:
            resource = self.manager.create(body)  # a new token, reused by the automatic retries
        if resource.replayed:
            self.app.stderr.write(
                f"Replayed: a create with client token {resource.client_token} was already done; "
                f"this is the {self.spec.kind} it made.\n")
        return show_columns(resource)


def _resolve_etag(manager: ResourceManager[Resource], ident: str, etag: str | None
                  ) -> tuple[Resource | None, str | None]:
    """``(resource read first, None)`` for a bare ``--etag``; ``(None, etag)`` for a value."""
    if etag is None:
        return None, None
    manager.check_etags()  # before anything is read or sent
    if etag == READ_FIRST:
        return manager.get(ident), None
    return None, etag


class _Modify(_Base, ShowOne):
    unset = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("ident", metavar=f"<{self.spec.kind.replace(' ', '-')}>",
                            help="UUID" + (" or name" if self.spec is NODE else ""))
        for option, name in self.spec.simple:
            if self.unset:
                parser.add_argument(option, action="store_true", help=f"Unset {name}.")
            else:
                parser.add_argument(option, metavar=f"<{name}>")
        for option, name in self.spec.dicts:
            parser.add_argument(option, action="append", metavar="<key>" if self.unset else "<key=value>",
                                help=f"{'Remove' if self.unset else 'Set'} a key of {name} (repeat).")
        for on, off, name in self.spec.flags:
            if self.unset:
                parser.add_argument(on, action="store_true", help=f"Unset {name}.")
            else:
                parser.add_argument(on, dest=name, action="store_true", default=None)
                parser.add_argument(off, dest=name, action="store_false")
        add_etag_option(parser)
        parser.add_argument(
            "--retry-on-conflict", type=int, default=0, metavar="<n>",
            help="With a bare --etag: on a stale etag, read again and re-apply the change up to <n> "
                 "times while it does not touch what changed (default 0: show the diff and fail).")
        return parser

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Sequence[Any]]:
        patch = _patch_from(self.spec, args, unset=self.unset)
        if not patch:
            what = "unset" if self.unset else "set"
            raise CommandError(f"nothing to {what}: give at least one field option")
        if args.retry_on_conflict and args.etag != READ_FIRST:
            raise CommandError(
                "--retry-on-conflict needs a bare --etag (read first, then re-apply the change on "
                "a conflict); without it the change would be sent with no etag, or retried on none")
        read, etag = _resolve_etag(self.manager, args.ident, args.etag)
        if read is not None:
            new = read.update(patch, etag=True, retries=args.retry_on_conflict)
        else:
            new = self.manager.update(args.ident, patch, etag=etag)
        return show_columns(new)


class SetCommand(_Modify):
    """Set fields (a JSON Patch of "add" operations); shows the result and its new etag."""


class UnsetCommand(_Modify):
    """Unset fields (a JSON Patch of "remove" operations); shows the result and its new etag."""

    unset = True


class DeleteCommand(_Base):
    """Delete resources."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("idents", nargs="+", metavar=f"<{self.spec.kind.replace(' ', '-')}>")
        add_etag_option(parser)
        return parser

    def take_action(self, args: argparse.Namespace) -> int:
        if args.etag not in (None, READ_FIRST) and len(args.idents) > 1:
            raise CommandError("--etag <etag> names the etag of one resource; give one, or a bare --etag")
        for ident in args.idents:
            read, etag = _resolve_etag(self.manager, ident, args.etag)
            if read is not None:
                read.delete(etag=True)
            else:
                self.manager.delete(ident, etag=etag)
            self.app.stdout.write(f"Deleted {self.spec.kind} {ident}\n")
        return 0


def _crud(spec: Spec) -> dict[str, type[Command]]:
    prefix = spec.kind
    made: dict[str, type[Command]] = {}
    for verb, base in (("list", ListCommand), ("show", ShowCommand), ("create", CreateCommand),
                       ("set", SetCommand), ("unset", UnsetCommand), ("delete", DeleteCommand)):
        doc = (base.__doc__ or "").replace("resources", spec.many).replace("resource", spec.kind)
        made[f"{prefix} {verb}"] = type(f"{spec.kind.title().replace(' ', '')}{verb.title()}", (base,),
                                        {"spec": spec, "__doc__": doc})
    return made


# -- node actions -----------------------------------------------------------------------


def _add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait", nargs="?", type=seconds, const=0.0, default=None, metavar="<seconds>",
        help="Wait for the action to finish, showing progress on stderr (optional timeout, default 600 s).")


def _wait(cmd: _Base, node: str, args: argparse.Namespace, **kwargs: Any) -> None:
    if args.wait is None:
        return
    timeout = args.wait or 600.0
    progress = Progress(f"node {node}", cmd.app.stderr)
    try:
        cmd.client.wait_for(node, timeout=timeout, progress=progress, **kwargs)
    finally:
        progress.done()


class _NodeAction(_Base):
    """A command acting on one node, named by its first argument."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("node", metavar="<node>", help="UUID or name")
        return parser


class ProvisionCommand(_NodeAction):
    verb = "manage"

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        if self.verb == "clean":
            parser.add_argument("--clean-steps", required=True, metavar="<json>",
                                help="The steps as a JSON list, e.g. "
                                     '\'[{"interface": "deploy", "step": "erase_devices"}]\'.')
        _add_wait(parser)
        return parser

    def take_action(self, args: argparse.Namespace) -> int:
        steps = None
        if self.verb == "clean":
            steps = _value(args.clean_steps)
            if not isinstance(steps, list):
                raise CommandError("--clean-steps must be a JSON list of steps")
        self.client.provision(args.node, self.verb, clean_steps=steps)
        _wait(self, args.node, args, field="provision_state", expected=VERB_TARGETS[self.verb],
              target_field="target_provision_state")
        return 0


class PowerCommand(_NodeAction):
    action = "on"

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        if self.action in ("off", "reboot"):
            parser.add_argument("--soft", action="store_true", help="Soft (ACPI) power off or reboot (1.27).")
        parser.add_argument("--power-timeout", type=int, metavar="<seconds>",
                            help="How long the driver may take (1.27).")
        _add_wait(parser)
        return parser

    def take_action(self, args: argparse.Namespace) -> int:
        target = {"on": "power on", "off": "power off", "reboot": "rebooting"}[self.action]
        if getattr(args, "soft", False):
            target = f"soft {target}"
        self.client.power(args.node, target, timeout=args.power_timeout)
        _wait(self, args.node, args, field="power_state", expected=POWER_TARGETS[target],
              target_field="target_power_state")
        return 0


class MaintenanceSet(_NodeAction):
    """Put a node in maintenance."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--reason", metavar="<text>")
        return parser

    def take_action(self, args: argparse.Namespace) -> int:
        self.client.maintenance(args.node, True, reason=args.reason)
        return 0


class MaintenanceUnset(_NodeAction):
    """Take a node out of maintenance."""

    def take_action(self, args: argparse.Namespace) -> int:
        self.client.maintenance(args.node, False)
        return 0


# -- resource classes -------------------------------------------------------------------


class ResourceClassList(_Base, Lister):
    """List resource classes (1.117)."""

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
        return ("Name",), [(rc.name,) for rc in self.client.resource_classes.list()]


class ResourceClassShow(_Base, ShowOne):
    """Show a resource class (1.117)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="<name>")
        return parser

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Sequence[Any]]:
        return show_columns(self.client.resource_classes.get(args.name))


class ResourceClassCreate(ResourceClassShow):
    """Create a CUSTOM_ resource class, or confirm it exists (an idempotent PUT, 1.117)."""

    def take_action(self, args: argparse.Namespace) -> tuple[Sequence[str], Sequence[Any]]:
        if not self.client.resource_classes.put(args.name):
            self.app.stderr.write(f"Resource class {args.name} already existed.\n")
        return super().take_action(args)


class ResourceClassDelete(_Base):
    """Delete resource classes (1.117)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("names", nargs="+", metavar="<name>")
        return parser

    def take_action(self, args: argparse.Namespace) -> int:
        for name in args.names:
            self.client.resource_classes.delete(name)
            self.app.stdout.write(f"Deleted resource class {name}\n")
        return 0


def _commands() -> dict[str, type[Command]]:
    made: dict[str, type[Command]] = {}
    for spec in (NODE, PORT, PORTGROUP, CHASSIS):
        made.update(_crud(spec))
    for verb in VERB_TARGETS:
        made[f"node {verb}"] = type(f"Node{verb.title()}", (ProvisionCommand,), {
            "verb": verb,
            "__doc__": f"Provision verb '{verb}' (ends in '{VERB_TARGETS[verb]}'); --wait to follow it."})
    for action in ("on", "off", "reboot"):
        made[f"node power {action}"] = type(f"NodePower{action.title()}", (PowerCommand,), {
            "action": action, "__doc__": f"Power {action} a node."})
    made["node maintenance set"] = MaintenanceSet
    made["node maintenance unset"] = MaintenanceUnset
    made["resource class list"] = ResourceClassList
    made["resource class show"] = ResourceClassShow
    made["resource class create"] = ResourceClassCreate
    made["resource class delete"] = ResourceClassDelete
    # Aliases: "portgroup ..." for "port group ...", "resource-class ..." for "resource class ...".
    for name, command in list(made.items()):
        if name.startswith("port group "):
            made["portgroup " + name.removeprefix("port group ")] = command
        elif name.startswith("resource class "):
            made["resource-class " + name.removeprefix("resource class ")] = command
    return made


COMMANDS: Final = _commands()
