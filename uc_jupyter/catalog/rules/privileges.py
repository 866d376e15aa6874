"""Unity Catalog's privilege model as pure functions: no I/O, no storage.

Privileges are granted on a catalog, schema, table or volume and inherited downward: ``SELECT`` on
a schema covers every table in it, ``ALL PRIVILEGES`` stands for every privilege, and the owner of
an object holds every privilege on it and on everything inside it. An action is allowed when the
principal holds each privilege of the action's requirement list, e.g. reading a table needs
``USE CATALOG`` on its catalog, ``USE SCHEMA`` on its schema and ``SELECT`` on the table.

Storage is governed apart from that hierarchy, as in Unity Catalog: the *metastore* grants
``CREATE CATALOG``, ``CREATE STORAGE CREDENTIAL`` and ``CREATE EXTERNAL LOCATION`` (metastore admins
hold them); a *storage credential* grants ``CREATE EXTERNAL LOCATION`` (making a location that uses
it); an *external location* (a URL prefix bound to a credential) grants ``CREATE EXTERNAL TABLE``,
``CREATE EXTERNAL VOLUME``, ``READ FILES`` and ``WRITE FILES`` below its URL. These securables have
no containers: their owner, an ``ALL PRIVILEGES`` grant or the privilege itself decides
(:func:`holds_flat`).

Example:
    >>> from uc_jupyter.catalog.rules.names import parse_name
    >>> t = parse_name("main.ml.iris")
    >>> facts = AccessFacts(owners={parse_name("main"): "admin"}, grants=frozenset())
    >>> first_missing("alice", requirements(Action.READ_TABLE, t), facts)
    (SecurableName(parts=('main',)), <Privilege.USE_CATALOG: 'USE CATALOG'>)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from uc_jupyter.catalog.rules.names import SecurableName, parse_name

__all__ = [
    "APPLIES_TO",
    "GRANTABLE",
    "METASTORE",
    "AccessFacts",
    "Action",
    "FlatFacts",
    "Grant",
    "Privilege",
    "SecurableKind",
    "Subtree",
    "check_grantable",
    "first_missing",
    "flat_name",
    "holds",
    "holds_flat",
    "is_owner",
    "requirements",
    "validate_principal",
    "visible",
    "visible_one",
]

METASTORE = "metastore"  # the name grants on the metastore are recorded under


class Privilege(str, enum.Enum):
    """The privileges of the embedded catalog (Unity Catalog's names)."""

    USE_CATALOG = "USE CATALOG"
    USE_SCHEMA = "USE SCHEMA"
    SELECT = "SELECT"
    MODIFY = "MODIFY"
    READ_VOLUME = "READ VOLUME"
    WRITE_VOLUME = "WRITE VOLUME"
    CREATE_SCHEMA = "CREATE SCHEMA"
    CREATE_TABLE = "CREATE TABLE"
    CREATE_VOLUME = "CREATE VOLUME"
    CREATE_CATALOG = "CREATE CATALOG"
    CREATE_STORAGE_CREDENTIAL = "CREATE STORAGE CREDENTIAL"
    CREATE_EXTERNAL_LOCATION = "CREATE EXTERNAL LOCATION"
    CREATE_EXTERNAL_TABLE = "CREATE EXTERNAL TABLE"
    CREATE_EXTERNAL_VOLUME = "CREATE EXTERNAL VOLUME"
    READ_FILES = "READ FILES"
    WRITE_FILES = "WRITE FILES"
    ALL_PRIVILEGES = "ALL PRIVILEGES"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str | Privilege) -> Privilege:
        """Accept ``"USE CATALOG"``, ``"use_catalog"`` or ``"all privileges"`` alike.

        Example:
            >>> Privilege.parse("read_volume")
            <Privilege.READ_VOLUME: 'READ VOLUME'>
        """
        if isinstance(text, Privilege):
            return text
        normalised = " ".join(str(text).replace("_", " ").upper().split())
        for privilege in cls:
            if privilege.value == normalised:
                return privilege
        known = ", ".join(p.value for p in cls)
        raise ValueError(f"unknown privilege {text!r}; use one of: {known}")


class SecurableKind(str, enum.Enum):
    CATALOG = "catalog"
    SCHEMA = "schema"
    TABLE = "table"
    VOLUME = "volume"
    METASTORE = "metastore"
    STORAGE_CREDENTIAL = "storage_credential"
    EXTERNAL_LOCATION = "external_location"

    def __str__(self) -> str:
        return self.value

    @property
    def flat(self) -> bool:
        """Outside the catalog/schema/object hierarchy: nothing is inherited from a container."""
        return self in _FLAT_KINDS

    @property
    def label(self) -> str:
        """How messages name the kind: ``external location``."""
        return self.value.replace("_", " ")

    @classmethod
    def parse_flat(cls, text: str | SecurableKind) -> SecurableKind:
        """Accept ``"location"``, ``"external_location"``, ``"credential"``, ``"metastore"`` alike.

        Example:
            >>> SecurableKind.parse_flat("location")
            <SecurableKind.EXTERNAL_LOCATION: 'external_location'>
        """
        if isinstance(text, SecurableKind) and text.flat:
            return text
        normalised = str(text).strip().lower().replace(" ", "_").replace("-", "_")
        kind = {
            "location": cls.EXTERNAL_LOCATION,
            "external_location": cls.EXTERNAL_LOCATION,
            "credential": cls.STORAGE_CREDENTIAL,
            "storage_credential": cls.STORAGE_CREDENTIAL,
            "metastore": cls.METASTORE,
        }.get(normalised)
        if kind is None:
            raise ValueError(f"unknown securable kind {text!r}; use 'location', 'credential' or 'metastore'")
        return kind


_FLAT_KINDS = frozenset({SecurableKind.METASTORE, SecurableKind.STORAGE_CREDENTIAL, SecurableKind.EXTERNAL_LOCATION})


_P = Privilege
# The privileges about data, granted in the catalog/schema/object hierarchy.
_DATA = frozenset(
    {
        _P.USE_CATALOG,
        _P.USE_SCHEMA,
        _P.SELECT,
        _P.MODIFY,
        _P.READ_VOLUME,
        _P.WRITE_VOLUME,
        _P.CREATE_SCHEMA,
        _P.CREATE_TABLE,
        _P.CREATE_VOLUME,
        _P.ALL_PRIVILEGES,
    }
)
GRANTABLE: Mapping[SecurableKind, frozenset[Privilege]] = {
    SecurableKind.CATALOG: _DATA,
    SecurableKind.SCHEMA: frozenset(
        {
            _P.USE_SCHEMA,
            _P.SELECT,
            _P.MODIFY,
            _P.READ_VOLUME,
            _P.WRITE_VOLUME,
            _P.CREATE_TABLE,
            _P.CREATE_VOLUME,
            _P.ALL_PRIVILEGES,
        }
    ),
    SecurableKind.TABLE: frozenset({_P.SELECT, _P.MODIFY, _P.ALL_PRIVILEGES}),
    SecurableKind.VOLUME: frozenset({_P.READ_VOLUME, _P.WRITE_VOLUME, _P.ALL_PRIVILEGES}),
    # ALL PRIVILEGES is not grantable on the metastore: that would make a second admin in all but name.
    SecurableKind.METASTORE: frozenset({_P.CREATE_CATALOG, _P.CREATE_STORAGE_CREDENTIAL, _P.CREATE_EXTERNAL_LOCATION}),
    SecurableKind.STORAGE_CREDENTIAL: frozenset({_P.CREATE_EXTERNAL_LOCATION, _P.ALL_PRIVILEGES}),
    SecurableKind.EXTERNAL_LOCATION: frozenset(
        {_P.CREATE_EXTERNAL_TABLE, _P.CREATE_EXTERNAL_VOLUME, _P.READ_FILES, _P.WRITE_FILES, _P.ALL_PRIVILEGES}
    ),
}


# The kinds of securable each privilege is about. A privilege granted on a container reaches the
# objects of these kinds inside it (SELECT on a schema: its tables; USE CATALOG: only the catalog).
APPLIES_TO: Mapping[Privilege, frozenset[SecurableKind]] = {
    _P.USE_CATALOG: frozenset({SecurableKind.CATALOG}),
    _P.CREATE_SCHEMA: frozenset({SecurableKind.CATALOG}),
    _P.USE_SCHEMA: frozenset({SecurableKind.SCHEMA}),
    _P.CREATE_TABLE: frozenset({SecurableKind.SCHEMA}),
    _P.CREATE_VOLUME: frozenset({SecurableKind.SCHEMA}),
    _P.SELECT: frozenset({SecurableKind.TABLE}),
    _P.MODIFY: frozenset({SecurableKind.TABLE}),
    _P.READ_VOLUME: frozenset({SecurableKind.VOLUME}),
    _P.WRITE_VOLUME: frozenset({SecurableKind.VOLUME}),
    _P.ALL_PRIVILEGES: frozenset(k for k in SecurableKind if not k.flat),
    _P.CREATE_CATALOG: frozenset({SecurableKind.METASTORE}),
    _P.CREATE_STORAGE_CREDENTIAL: frozenset({SecurableKind.METASTORE}),
    _P.CREATE_EXTERNAL_LOCATION: frozenset({SecurableKind.METASTORE, SecurableKind.STORAGE_CREDENTIAL}),
    _P.CREATE_EXTERNAL_TABLE: frozenset({SecurableKind.EXTERNAL_LOCATION}),
    _P.CREATE_EXTERNAL_VOLUME: frozenset({SecurableKind.EXTERNAL_LOCATION}),
    _P.READ_FILES: frozenset({SecurableKind.EXTERNAL_LOCATION}),
    _P.WRITE_FILES: frozenset({SecurableKind.EXTERNAL_LOCATION}),
}


@dataclass(frozen=True)
class Grant:
    """One privilege held by one principal on one securable."""

    securable: SecurableName
    privilege: Privilege
    principal: str


@dataclass(frozen=True)
class AccessFacts:
    """What the metastore knows about a securable's lineage: owners and grants on each level."""

    owners: Mapping[SecurableName, str]
    grants: frozenset[Grant]


class Action(enum.Enum):
    """Things a principal does through the catalog, each with a fixed requirement list."""

    USE_CATALOG = "use catalog"
    USE_SCHEMA = "use schema"
    READ_TABLE = "read table"
    WRITE_TABLE = "write table"
    READ_VOLUME = "read volume"
    WRITE_VOLUME = "write volume"
    CREATE_SCHEMA = "create schema"
    CREATE_TABLE = "create table"
    CREATE_VOLUME = "create volume"


def requirements(action: Action, name: SecurableName) -> tuple[tuple[SecurableName, Privilege], ...]:
    """The (securable, privilege) pairs ``action`` on ``name`` needs, outermost first.

    ``name`` is the object acted on (a table or volume), or the container for CREATE_* actions
    (the catalog for CREATE_SCHEMA, the schema for CREATE_TABLE / CREATE_VOLUME).
    """
    lineage = name.lineage()
    use_chain: list[tuple[SecurableName, Privilege]] = [(lineage[0], _P.USE_CATALOG)]
    if len(lineage) > 1:
        use_chain.append((lineage[1], _P.USE_SCHEMA))
    final: dict[Action, Privilege | None] = {
        Action.USE_CATALOG: None,
        Action.USE_SCHEMA: None,
        Action.READ_TABLE: _P.SELECT,
        Action.WRITE_TABLE: _P.MODIFY,
        Action.READ_VOLUME: _P.READ_VOLUME,
        Action.WRITE_VOLUME: _P.WRITE_VOLUME,
        Action.CREATE_SCHEMA: _P.CREATE_SCHEMA,
        Action.CREATE_TABLE: _P.CREATE_TABLE,
        Action.CREATE_VOLUME: _P.CREATE_VOLUME,
    }
    privilege = final[action]
    if privilege is not None:
        use_chain.append((name, privilege))
    return tuple(use_chain)


def holds(principal: str, privilege: Privilege, name: SecurableName, facts: AccessFacts) -> bool:
    """True when ``principal`` owns ``name`` or an ancestor, or was granted ``privilege`` (or
    ALL PRIVILEGES) on ``name`` or an ancestor."""
    for level in name.lineage():
        if facts.owners.get(level) == principal:
            return True
        if Grant(level, privilege, principal) in facts.grants:
            return True
        if Grant(level, _P.ALL_PRIVILEGES, principal) in facts.grants:
            return True
    return False


def first_missing(
    principal: str,
    needed: Iterable[tuple[SecurableName, Privilege]],
    facts: AccessFacts,
) -> tuple[SecurableName, Privilege] | None:
    """The first requirement ``principal`` does not meet, or None when all are met."""
    for name, privilege in needed:
        if not holds(principal, privilege, name, facts):
            return name, privilege
    return None


def is_owner(principal: str, name: SecurableName, facts: AccessFacts) -> bool:
    """Ownership of ``name`` or of any enclosing object (catalog owners manage their schemas)."""
    return any(facts.owners.get(level) == principal for level in name.lineage())


def visible(
    principal: str,
    objects: Mapping[SecurableName, tuple[SecurableKind, str]],
    grants: Iterable[Grant],
) -> set[SecurableName]:
    """The objects ``principal`` may see in listings: those it owns (or whose container it owns),
    those a privilege it holds applies to (granted on them or on a container), and the containers
    of all of these, so a table granted alone still shows its schema and catalog.

    ``objects`` maps each securable to its (kind, owner).
    """
    held: dict[SecurableName, set[Privilege]] = {}
    for grant in grants:
        if grant.principal == principal:
            held.setdefault(grant.securable, set()).add(grant.privilege)
    seen: set[SecurableName] = set()
    for name, (kind, _owner) in objects.items():
        lineage = name.lineage()
        owned = any(objects.get(level, (None, None))[1] == principal for level in lineage)
        reached = any(kind in APPLIES_TO[p] for level in lineage for p in held.get(level, ()))
        if owned or reached:
            seen.update(lineage)
    return seen


@dataclass(frozen=True)
class Subtree:
    """What lies strictly below one securable, as far as :func:`visible_one` needs it.

    ``owned``: the principal owns an object below it. ``grants``: the principal's grants on objects
    below it. ``kinds``: for the securable and for each securable granted below it, the kinds of the
    objects in its subtree (itself included). A caller may leave out the kinds that no privilege
    involved applies to (those granted on the lineage, for the securable; those granted on it, for a
    securable below), since only those can matter: the metastore asks about no other kind.
    """

    owned: bool = False
    grants: frozenset[Grant] = frozenset()
    kinds: Mapping[SecurableName, frozenset[SecurableKind]] = field(default_factory=dict)


def visible_one(
    principal: str,
    name: SecurableName,
    kind: SecurableKind,
    facts: AccessFacts,
    below: Subtree | None = None,
) -> bool:
    """Whether ``name`` (an object of ``kind``) is in :func:`visible` of the whole metastore, from only
    its lineage's ``facts`` (owners and grants on each level) and what lies ``below`` it.

    It is monotone in ``below``: without it the answer may be a false "no", never a false "yes", so a
    caller asks the lineage first and reads the subtree only when that does not decide.

    Example:
        >>> from uc_jupyter.catalog.rules.names import parse_name
        >>> main, t = parse_name("main"), parse_name("main.ml.t")
        >>> facts = AccessFacts(owners={main: "admin"}, grants=frozenset())
        >>> visible_one("alice", main, SecurableKind.CATALOG, facts)
        False
        >>> visible_one("alice", main, SecurableKind.CATALOG, facts,
        ...             Subtree(grants=frozenset({Grant(t, Privilege.SELECT, "alice")}),
        ...                     kinds={t: frozenset({SecurableKind.TABLE})}))
        True
    """
    below = below if below is not None else Subtree()
    lineage = name.lineage()
    if below.owned or any(facts.owners.get(level) == principal for level in lineage):
        return True
    # A privilege granted on the lineage shows the object when it applies to the object or to
    # something inside it (SELECT on a catalog shows the catalog only when it holds a table).
    here = below.kinds.get(name, frozenset()) | {kind}
    on_lineage = set(lineage)
    for grant in facts.grants:
        if grant.principal == principal and grant.securable in on_lineage and APPLIES_TO[grant.privilege] & here:
            return True
    depth = len(name.parts)
    for grant in below.grants:
        inside = len(grant.securable.parts) > depth and grant.securable.parts[:depth] == name.parts
        reaches = APPLIES_TO[grant.privilege] & below.kinds.get(grant.securable, frozenset())
        if grant.principal == principal and inside and reaches:
            return True
    return False


@dataclass(frozen=True)
class FlatFacts:
    """What decides a privilege on a securable outside the hierarchy (metastore, storage credential,
    external location): its owner (None for the metastore), the privileges granted on it to the
    principal asking, and whether that principal is a metastore admin."""

    owner: str | None
    granted: frozenset[Privilege]
    admin: bool


def holds_flat(principal: str, privilege: Privilege, kind: SecurableKind, facts: FlatFacts) -> bool:
    """Does ``principal`` hold ``privilege`` on a flat securable of ``kind``? Admins hold every
    metastore privilege; owners every privilege on what they own; otherwise a grant of it (or of
    ALL PRIVILEGES, where that is grantable) decides.

    Example:
        >>> facts = FlatFacts(owner="admin", granted=frozenset({Privilege.READ_FILES}), admin=False)
        >>> where = SecurableKind.EXTERNAL_LOCATION
        >>> [holds_flat("alice", p, where, facts) for p in (Privilege.READ_FILES, Privilege.WRITE_FILES)]
        [True, False]
    """
    if kind is SecurableKind.METASTORE and facts.admin:
        return True
    if facts.owner is not None and facts.owner == principal:
        return True
    return privilege in facts.granted or (
        _P.ALL_PRIVILEGES in facts.granted and _P.ALL_PRIVILEGES in GRANTABLE[kind] and privilege in GRANTABLE[kind]
    )


def check_grantable(kind: SecurableKind, name: object, privilege: Privilege) -> None:
    """Raise ValueError when ``privilege`` cannot be granted on a securable of ``kind``."""
    if privilege not in GRANTABLE[kind]:
        allowed = ", ".join(sorted(p.value for p in GRANTABLE[kind]))
        label = kind.label
        raise ValueError(f"{privilege} cannot be granted on {label} {name}; on a {label} grant one of: {allowed}")


def validate_principal(principal: str) -> str:
    """Return ``principal`` when it is a usable principal name, else raise ValueError."""
    if not isinstance(principal, str) or not principal.strip():
        raise ValueError(f"invalid principal {principal!r}: give a user or service principal name")
    if principal != principal.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in principal):
        raise ValueError(f"invalid principal {principal!r}: no surrounding spaces or control characters")
    if len(principal) > 255:
        raise ValueError(f"invalid principal {principal[:20]!r}...: longer than 255 characters")
    return principal


def flat_name(kind: SecurableKind, name: str) -> str:
    """The stored name of a flat securable: a one-part name, lower-case; the metastore is ``metastore``."""
    if kind is SecurableKind.METASTORE:
        if str(name).strip().lower() not in ("", METASTORE):
            raise ValueError(f"grants on the metastore name it 'metastore', got {name!r}")
        return METASTORE
    return str(parse_name(name, levels=(1,)))
