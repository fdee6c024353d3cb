"""``sparkmq user`` and ``sparkmq acl``: the users and policies of ``[auth]``.

They edit the files of an auth directory (``<data dir>/auth`` of a broker,
or ``--auth-dir`` of a NameServer) on this machine; a running broker or
NameServer applies the change within about a second.  ::

    sparkmq user add admin --super --data-dir data       prints admin's token, once
    sparkmq user add app --data-dir data
    sparkmq acl grant app Topic:orders Pub,Sub --data-dir data
    sparkmq acl grant app "Topic:audit-*" Sub --data-dir data
    sparkmq acl grant app Topic:audit-secret Sub --deny --data-dir data
    sparkmq acl list --data-dir data
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .common import AsJson, fail, note, print_json, print_table, say

if TYPE_CHECKING:
    from ..auth import UserStore

__all__ = ["acl_app", "user_app"]

user_app = typer.Typer(help="Users for authentication (secrets hashed under <data dir>/auth).",
                       no_args_is_help=True)
acl_app = typer.Typer(help="Policies of users: Pub/Sub/Admin on Topic:, Group:, Cluster:.",
                      no_args_is_help=True)

DataDir = Annotated[Path, typer.Option("--data-dir", help="The broker's data directory (its auth/ is used).")]
AuthDir = Annotated[Path | None, typer.Option(
    "--auth-dir", help="The auth directory itself (a NameServer's auth_dir, or the auth.dir setting); wins over --data-dir.")]


def _store(data_dir: Path, auth_dir: Path | None) -> UserStore:
    from ..auth import UserStore  # the users file loads when a command runs

    return UserStore(auth_dir if auth_dir is not None else data_dir / "auth")


@user_app.command("add")
def user_add(
    name: Annotated[str, typer.Argument(help="User name (no ':' or spaces).")],
    super_user: Annotated[bool, typer.Option("--super", help="A super user: every action on everything.")] = False,
    data_dir: DataDir = Path("data"),
    auth_dir: AuthDir = None,
) -> None:
    """Create a user (or give an existing one a new secret) and print its token once.

    The token is <user>:<secret>: pass it as --token / SPARKMQ_TOKEN, token= (client) or the Spark
    option 'token'; or sign with user + secret (client user=/secret=, Spark 'user'/'secret').
    """
    store = _store(data_dir, auth_dir)
    try:
        secret = store.add_user(name, super_user=super_user)
    except ValueError as exc:
        fail(str(exc))
    say(f"{name}:{secret}")
    note(f"user {name!r} saved in {store.users_path}{' (super user)' if super_user else ''}; the line above is "
         "its token and is shown only now")


@user_app.command("remove")
def user_remove(name: str, data_dir: DataDir = Path("data"), auth_dir: AuthDir = None) -> None:
    """Delete a user and its policy; its token stops working within about a second."""
    try:
        _store(data_dir, auth_dir).remove_user(name)
    except KeyError:
        fail(f"no user {name!r}; see `sparkmq user list`")
    note(f"user {name!r} removed")


@user_app.command("list")
def user_list(data_dir: DataDir = Path("data"), auth_dir: AuthDir = None, as_json: AsJson = False) -> None:
    """The users, whether each is a super user, enabled, and how many policy entries it has."""
    users = _store(data_dir, auth_dir).list_users()
    if as_json:
        print_json(users)
        return
    print_table(["user", "super", "enabled", "policy entries"],
                [[u["user"], u["super"], u["enabled"], u["policy_entries"]] for u in users], title="Users")


@acl_app.command("grant")
def acl_grant(
    user: str,
    resource: Annotated[str, typer.Argument(help="Topic:NAME, Topic:PREFIX*, Group:..., Cluster:..., or *.")],
    actions: Annotated[str, typer.Argument(help="Pub, Sub, Admin or All, comma separated.")],
    deny: Annotated[bool, typer.Option("--deny", help="Refuse these actions (deny beats allow at equal rank).")]
    = False,
    data_dir: DataDir = Path("data"),
    auth_dir: AuthDir = None,
) -> None:
    """Allow (or with --deny refuse) actions on a resource; the most specific matching entry decides."""
    from ..auth import parse_entry

    try:
        entry = parse_entry({"resource": resource, "actions": actions, "decision": "deny" if deny else "allow"})
        _store(data_dir, auth_dir).grant(user, entry)
    except ValueError as exc:
        fail(str(exc))
    except KeyError:
        fail(f"no user {user!r}; create it with `sparkmq user add {user}`")
    note(f"{user}: {entry.decision} {','.join(entry.actions)} on {entry.resource}")


@acl_app.command("revoke")
def acl_revoke(user: str, resource: str, data_dir: DataDir = Path("data"), auth_dir: AuthDir = None) -> None:
    """Remove a user's entries (allow and deny) on exactly this resource pattern."""
    removed = _store(data_dir, auth_dir).revoke(user, resource)
    if not removed:
        fail(f"{user} has no entry on {resource}; see `sparkmq acl list {user}`")
    note(f"{user}: {removed} entr{'y' if removed == 1 else 'ies'} on {resource} removed")


@acl_app.command("list")
def acl_list(user: Annotated[str | None, typer.Argument()] = None, data_dir: DataDir = Path("data"),
             auth_dir: AuthDir = None, as_json: AsJson = False) -> None:
    """Every policy entry (of one user)."""
    policy = _store(data_dir, auth_dir).policy(user)
    if as_json:
        print_json(policy)
        return
    rows = [[u, e["resource"], ",".join(e["actions"]), e["decision"]] for u, entries in policy.items()
            for e in entries]
    print_table(["user", "resource", "actions", "decision"], rows, title="Policies")
