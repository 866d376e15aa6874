"""The privilege model (requirements, inheritance, ownership, grantability) as pure functions."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog.rules.names import SecurableName, parse_name
from uc_jupyter.catalog.rules.privileges import (
    APPLIES_TO,
    GRANTABLE,
    AccessFacts,
    Action,
    FlatFacts,
    Grant,
    Privilege,
    SecurableKind,
    Subtree,
    check_grantable,
    first_missing,
    holds,
    holds_flat,
    is_owner,
    requirements,
    validate_principal,
    visible,
    visible_one,
)

P = Privilege
ALICE, BOB = "alice", "bob"
MAIN = parse_name("main")
SCHEMA_A, SCHEMA_B = parse_name("main.a"), parse_name("main.b")
TABLE_1, TABLE_2 = parse_name("main.a.t1"), parse_name("main.b.t2")
VOLUME = parse_name("main.a.v1")
UNIVERSE = (MAIN, SCHEMA_A, SCHEMA_B, TABLE_1, TABLE_2)

Requirement = tuple[SecurableName, Privilege]

# action -> (the name it acts on, what Unity Catalog requires, outermost first)
EXPECTED: dict[Action, tuple[SecurableName, tuple[Requirement, ...]]] = {
    Action.USE_CATALOG: (MAIN, ((MAIN, P.USE_CATALOG),)),
    Action.USE_SCHEMA: (SCHEMA_A, ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA))),
    Action.READ_TABLE: (TABLE_1, ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA), (TABLE_1, P.SELECT))),
    Action.WRITE_TABLE: (TABLE_1, ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA), (TABLE_1, P.MODIFY))),
    Action.READ_VOLUME: (VOLUME, ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA), (VOLUME, P.READ_VOLUME))),
    Action.WRITE_VOLUME: (
        VOLUME,
        ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA), (VOLUME, P.WRITE_VOLUME)),
    ),
    Action.CREATE_SCHEMA: (MAIN, ((MAIN, P.USE_CATALOG), (MAIN, P.CREATE_SCHEMA))),
    Action.CREATE_TABLE: (
        SCHEMA_A,
        ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA), (SCHEMA_A, P.CREATE_TABLE)),
    ),
    Action.CREATE_VOLUME: (
        SCHEMA_A,
        ((MAIN, P.USE_CATALOG), (SCHEMA_A, P.USE_SCHEMA), (SCHEMA_A, P.CREATE_VOLUME)),
    ),
}

# Unity Catalog's privilege types per securable (the ones this catalog implements).
DATA_PRIVILEGES = frozenset(
    {
        P.USE_CATALOG,
        P.USE_SCHEMA,
        P.SELECT,
        P.MODIFY,
        P.READ_VOLUME,
        P.WRITE_VOLUME,
        P.CREATE_SCHEMA,
        P.CREATE_TABLE,
        P.CREATE_VOLUME,
        P.ALL_PRIVILEGES,
    }
)
EXPECTED_GRANTABLE: dict[SecurableKind, frozenset[Privilege]] = {
    SecurableKind.CATALOG: DATA_PRIVILEGES,
    SecurableKind.SCHEMA: DATA_PRIVILEGES - {P.USE_CATALOG, P.CREATE_SCHEMA},
    SecurableKind.TABLE: frozenset({P.SELECT, P.MODIFY, P.ALL_PRIVILEGES}),
    SecurableKind.VOLUME: frozenset({P.READ_VOLUME, P.WRITE_VOLUME, P.ALL_PRIVILEGES}),
    SecurableKind.METASTORE: frozenset({P.CREATE_CATALOG, P.CREATE_STORAGE_CREDENTIAL, P.CREATE_EXTERNAL_LOCATION}),
    SecurableKind.STORAGE_CREDENTIAL: frozenset({P.CREATE_EXTERNAL_LOCATION, P.ALL_PRIVILEGES}),
    SecurableKind.EXTERNAL_LOCATION: frozenset(
        {P.CREATE_EXTERNAL_TABLE, P.CREATE_EXTERNAL_VOLUME, P.READ_FILES, P.WRITE_FILES, P.ALL_PRIVILEGES}
    ),
}
KIND_EXAMPLE: dict[SecurableKind, object] = {
    SecurableKind.CATALOG: MAIN,
    SecurableKind.SCHEMA: SCHEMA_A,
    SecurableKind.TABLE: TABLE_1,
    SecurableKind.VOLUME: VOLUME,
    SecurableKind.METASTORE: "metastore",
    SecurableKind.STORAGE_CREDENTIAL: "lake",
    SecurableKind.EXTERNAL_LOCATION: "raw",
}


def target(action: Action) -> SecurableName:
    return EXPECTED[action][0]


def needed(action: Action) -> tuple[Requirement, ...]:
    return EXPECTED[action][1]


def facts(grants: Iterable[Grant] = (), owners: Mapping[SecurableName, str] | None = None) -> AccessFacts:
    return AccessFacts(owners=dict(owners or {}), grants=frozenset(grants))


def grants_of(pairs: Iterable[Requirement], principal: str = ALICE) -> set[Grant]:
    return {Grant(name, privilege, principal) for name, privilege in pairs}


def all_but(action: Action, index: int) -> set[Grant]:
    """Grants to alice for every requirement of ``action`` except the one at ``index``."""
    return grants_of(req for i, req in enumerate(needed(action)) if i != index)


def missing(action: Action, access: AccessFacts, principal: str = ALICE) -> Requirement | None:
    return first_missing(principal, requirements(action, target(action)), access)


def strict_ancestors(name: SecurableName) -> tuple[SecurableName, ...]:
    return tuple(SecurableName(name.parts[:n]) for n in range(1, len(name.parts)))


def lineage_of(name: SecurableName) -> tuple[SecurableName, ...]:
    return (*strict_ancestors(name), name)


REQUIREMENT_CASES = [
    pytest.param(action, i, id=f"{action.name}-{req[1].name}@{req[0]}")
    for action in Action
    for i, req in enumerate(needed(action))
]
# (action, requirement index, level of that requirement's lineage), optionally strict ancestors only
LEVEL_CASES = [
    pytest.param(action, i, level, id=f"{action.name}-{req[1].name}@{req[0]}-on-{level}")
    for action in Action
    for i, req in enumerate(needed(action))
    for level in lineage_of(req[0])
]
ANCESTOR_CASES = [case for case in LEVEL_CASES if case.values[2] != needed(case.values[0])[case.values[1]][0]]


# --- requirement lists ------------------------------------------------------------------------------


@pytest.mark.parametrize("action", list(Action))
def test_requirements_match_unity_catalog(action: Action) -> None:
    assert requirements(action, target(action)) == needed(action)


def test_every_action_is_covered() -> None:
    assert set(EXPECTED) == set(Action)


# --- the matrix: each action x each requirement -----------------------------------------------------


@pytest.mark.parametrize("action", list(Action))
def test_all_requirements_granted_is_allowed(action: Action) -> None:
    assert missing(action, facts(grants_of(needed(action)))) is None


@pytest.mark.parametrize("action", list(Action))
def test_first_missing_is_the_outermost_unmet_requirement(action: Action) -> None:
    reqs = needed(action)
    for size in range(len(reqs) + 1):
        for absent in itertools.combinations(range(len(reqs)), size):
            present = grants_of(req for i, req in enumerate(reqs) if i not in absent)
            expected = reqs[min(absent)] if absent else None
            assert missing(action, facts(present)) == expected, absent


@pytest.mark.parametrize(("action", "index"), REQUIREMENT_CASES)
def test_missing_requirement_is_reported_exactly(action: Action, index: int) -> None:
    assert missing(action, facts(all_but(action, index))) == needed(action)[index]


@pytest.mark.parametrize(("action", "index", "ancestor"), ANCESTOR_CASES)
def test_requirement_is_inherited_from_an_ancestor(action: Action, index: int, ancestor: SecurableName) -> None:
    privilege = needed(action)[index][1]
    assert missing(action, facts(all_but(action, index) | {Grant(ancestor, privilege, ALICE)})) is None


@pytest.mark.parametrize(("action", "index", "level"), LEVEL_CASES)
def test_all_privileges_anywhere_on_the_lineage_covers_a_requirement(
    action: Action, index: int, level: SecurableName
) -> None:
    grant = Grant(level, P.ALL_PRIVILEGES, ALICE)
    assert missing(action, facts(all_but(action, index) | {grant})) is None


@pytest.mark.parametrize(("action", "index", "level"), LEVEL_CASES)
def test_owner_of_the_securable_or_an_ancestor_meets_a_requirement(
    action: Action, index: int, level: SecurableName
) -> None:
    assert missing(action, facts(all_but(action, index), owners={level: ALICE})) is None
    assert missing(action, facts(all_but(action, index), owners={level: BOB})) == needed(action)[index]


@pytest.mark.parametrize("action", list(Action))
def test_catalog_owner_may_do_everything_without_grants(action: Action) -> None:
    assert missing(action, facts(owners={MAIN: ALICE})) is None
    assert missing(action, facts(owners={MAIN: ALICE}), principal=BOB) == needed(action)[0]


@pytest.mark.parametrize("action", list(Action))
def test_object_owner_still_needs_use_on_the_containers(action: Action) -> None:
    reqs = needed(action)
    owned = reqs[-1][0]
    expected = None if owned == MAIN else (MAIN, P.USE_CATALOG)
    assert missing(action, facts(owners={owned: ALICE})) == expected


@pytest.mark.parametrize(("action", "index"), REQUIREMENT_CASES)
def test_grant_to_another_principal_does_not_count(action: Action, index: int) -> None:
    others = grants_of([needed(action)[index]], principal=BOB)
    assert missing(action, facts(all_but(action, index) | others)) == needed(action)[index]
    assert missing(action, facts(grants_of(needed(action))), principal=BOB) == needed(action)[0]


@pytest.mark.parametrize(("action", "index"), REQUIREMENT_CASES)
def test_revoking_a_grant_denies_again(action: Action, index: int) -> None:
    everything = grants_of(needed(action))
    assert missing(action, facts(everything)) is None
    revoked = everything - grants_of([needed(action)[index]])
    assert missing(action, facts(revoked)) == needed(action)[index]


# --- inheritance only flows downward ----------------------------------------------------------------

DESCENDANT_CASES = [
    pytest.param(name, below, id=f"{below}-does-not-cover-{name}")
    for name in (*UNIVERSE, VOLUME)
    for below in (*UNIVERSE, VOLUME)
    if len(below.parts) > len(name.parts) and below.parts[: len(name.parts)] == name.parts
]
UNRELATED_CASES = [
    pytest.param(name, other, id=f"{other}-does-not-cover-{name}")
    for name in (*UNIVERSE, VOLUME)
    for other in (*UNIVERSE, VOLUME)
    if other not in lineage_of(name) and name not in lineage_of(other)
]


@pytest.mark.parametrize(("name", "other"), DESCENDANT_CASES + UNRELATED_CASES)
@pytest.mark.parametrize("privilege", list(Privilege))
def test_grants_and_ownership_below_or_beside_do_not_flow_up(
    name: SecurableName, other: SecurableName, privilege: Privilege
) -> None:
    grants = {Grant(other, privilege, ALICE), Grant(other, P.ALL_PRIVILEGES, ALICE)}
    access = facts(grants, owners={other: ALICE})
    assert not holds(ALICE, privilege, name, access)
    assert not is_owner(ALICE, name, access)


def test_privileges_are_not_interchangeable() -> None:
    for granted, asked in itertools.permutations(set(Privilege) - {P.ALL_PRIVILEGES}, 2):
        assert not holds(ALICE, asked, TABLE_1, facts({Grant(MAIN, granted, ALICE)})), (granted, asked)


# --- ownership --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owned", "name", "expected"),
    [
        (MAIN, MAIN, True),
        (MAIN, SCHEMA_A, True),
        (MAIN, TABLE_1, True),
        (SCHEMA_A, TABLE_1, True),
        (SCHEMA_A, VOLUME, True),
        (SCHEMA_A, MAIN, False),
        (TABLE_1, SCHEMA_A, False),
        (SCHEMA_A, TABLE_2, False),
    ],
)
def test_is_owner_covers_the_owned_securable_and_everything_inside(
    owned: SecurableName, name: SecurableName, expected: bool
) -> None:
    assert is_owner(ALICE, name, facts(owners={owned: ALICE})) is expected
    assert is_owner(BOB, name, facts(owners={owned: ALICE})) is False


def test_all_privileges_does_not_make_an_owner() -> None:
    assert not is_owner(ALICE, TABLE_1, facts({Grant(MAIN, P.ALL_PRIVILEGES, ALICE)}))


# --- against a brute-force oracle -------------------------------------------------------------------

# Grants in the catalog tree are of data privileges (check_grantable refuses the others there).
ALL_GRANTS = [Grant(n, p, u) for n in UNIVERSE for p in DATA_PRIVILEGES for u in (ALICE, BOB)]
access_facts = st.builds(
    facts,
    st.frozensets(st.sampled_from(ALL_GRANTS), max_size=12),
    st.dictionaries(st.sampled_from(UNIVERSE), st.sampled_from([ALICE, BOB]), max_size=2),
)
CHECKS = [(u, p, n) for u in (ALICE, BOB) for p in DATA_PRIVILEGES for n in UNIVERSE]
ACTION_CHECKS = [
    (u, action, name)
    for u in (ALICE, BOB)
    for action in Action
    for name in UNIVERSE
    if len(name.parts) == len(target(action).parts)
]


def oracle(principal: str, privilege: Privilege, name: SecurableName, access: AccessFacts) -> bool:
    levels = [level for level in UNIVERSE if name.parts[: len(level.parts)] == level.parts]
    return any(
        access.owners.get(level) == principal
        or Grant(level, privilege, principal) in access.grants
        or Grant(level, P.ALL_PRIVILEGES, principal) in access.grants
        for level in levels
    )


def allowed(principal: str, action: Action, name: SecurableName, access: AccessFacts) -> bool:
    return first_missing(principal, requirements(action, name), access) is None


@settings(max_examples=150)
@given(access_facts)
def test_holds_matches_the_brute_force_oracle(access: AccessFacts) -> None:
    for principal, privilege, name in CHECKS:
        assert holds(principal, privilege, name, access) == oracle(principal, privilege, name, access)


@settings(max_examples=100)
@given(access_facts)
def test_first_missing_is_the_first_requirement_the_oracle_denies(access: AccessFacts) -> None:
    for principal, action, name in ACTION_CHECKS:
        reqs = requirements(action, name)
        expected = next((r for r in reqs if not oracle(principal, r[1], r[0], access)), None)
        assert first_missing(principal, reqs, access) == expected


@settings(max_examples=100)
@given(access_facts, st.sampled_from(ALL_GRANTS))
def test_adding_a_grant_never_denies_what_was_allowed(access: AccessFacts, extra: Grant) -> None:
    more = AccessFacts(owners=access.owners, grants=access.grants | {extra})
    for principal, privilege, name in CHECKS:
        if holds(principal, privilege, name, access):
            assert holds(principal, privilege, name, more)
    for principal, action, name in ACTION_CHECKS:
        if allowed(principal, action, name, access):
            assert allowed(principal, action, name, more)


# --- grantability -----------------------------------------------------------------------------------


def test_grantable_table_matches_unity_catalog() -> None:
    assert dict(GRANTABLE) == EXPECTED_GRANTABLE


@pytest.mark.parametrize("kind", list(SecurableKind))
@pytest.mark.parametrize("privilege", list(Privilege))
def test_check_grantable(kind: SecurableKind, privilege: Privilege) -> None:
    name = KIND_EXAMPLE[kind]
    if privilege in EXPECTED_GRANTABLE[kind]:
        check_grantable(kind, name, privilege)
        return
    with pytest.raises(ValueError, match="cannot be granted") as error:
        check_grantable(kind, name, privilege)
    message = str(error.value)
    assert f"{privilege.value} cannot be granted on {kind.label} {name}" in message
    assert all(p.value in message for p in EXPECTED_GRANTABLE[kind])


# --- securables outside the catalog tree: metastore, storage credentials, external locations --------

FLAT_KINDS = [SecurableKind.METASTORE, SecurableKind.STORAGE_CREDENTIAL, SecurableKind.EXTERNAL_LOCATION]


def flat_oracle(principal: str, privilege: Privilege, kind: SecurableKind, access: FlatFacts) -> bool:
    """Unity Catalog's rule, spelled out: metastore admins hold the metastore's privileges, owners
    everything on what they own, and grantees what was granted (ALL PRIVILEGES: what the kind offers)."""
    if kind is SecurableKind.METASTORE and access.admin:
        return True
    if access.owner == principal:
        return True
    if privilege in access.granted:
        return True
    offered = EXPECTED_GRANTABLE[kind]
    return P.ALL_PRIVILEGES in access.granted and P.ALL_PRIVILEGES in offered and privilege in offered


@settings(max_examples=300)
@given(
    st.sampled_from(FLAT_KINDS),
    st.sampled_from(list(Privilege)),
    st.builds(
        FlatFacts,
        owner=st.sampled_from([None, ALICE, BOB]),
        granted=st.frozensets(st.sampled_from(list(Privilege)), max_size=4),
        admin=st.booleans(),
    ),
)
def test_holds_flat_matches_the_oracle(kind: SecurableKind, privilege: Privilege, access: FlatFacts) -> None:
    assert holds_flat(ALICE, privilege, kind, access) == flat_oracle(ALICE, privilege, kind, access)


def test_all_privileges_on_a_location_does_not_reach_the_metastore() -> None:
    access = FlatFacts(owner=None, granted=frozenset({P.ALL_PRIVILEGES}), admin=False)
    assert holds_flat(ALICE, P.READ_FILES, SecurableKind.EXTERNAL_LOCATION, access)
    assert not holds_flat(ALICE, P.CREATE_CATALOG, SecurableKind.METASTORE, access)
    assert not holds_flat(ALICE, P.SELECT, SecurableKind.EXTERNAL_LOCATION, access)


def test_flat_privileges_are_not_grantable_in_the_catalog_tree() -> None:
    for privilege in (P.CREATE_CATALOG, P.CREATE_EXTERNAL_VOLUME, P.READ_FILES, P.WRITE_FILES):
        with pytest.raises(ValueError, match="cannot be granted on catalog main"):
            check_grantable(SecurableKind.CATALOG, MAIN, privilege)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("location", SecurableKind.EXTERNAL_LOCATION),
        ("External Location", SecurableKind.EXTERNAL_LOCATION),
        ("credential", SecurableKind.STORAGE_CREDENTIAL),
        ("storage-credential", SecurableKind.STORAGE_CREDENTIAL),
        ("metastore", SecurableKind.METASTORE),
    ],
)
def test_flat_kinds_parse(text: str, kind: SecurableKind) -> None:
    assert SecurableKind.parse_flat(text) is kind


def test_unknown_flat_kind_is_one_line() -> None:
    with pytest.raises(ValueError, match="unknown securable kind 'table'; use 'location', 'credential' or 'metastore'"):
        SecurableKind.parse_flat("table")


# --- parsing privileges and principals --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("use catalog", P.USE_CATALOG),
        ("USE_CATALOG", P.USE_CATALOG),
        (" Use   Catalog ", P.USE_CATALOG),
        (P.USE_CATALOG, P.USE_CATALOG),
        ("all privileges", P.ALL_PRIVILEGES),
        ("read_volume", P.READ_VOLUME),
        *((p.value, p) for p in Privilege),
        *((p.name.lower(), p) for p in Privilege),
    ],
)
def test_privilege_parse_accepts_spellings(text: str | Privilege, expected: Privilege) -> None:
    assert Privilege.parse(text) is expected


@pytest.mark.parametrize("text", ["USE EVERYTHING", "", "USE", "SELECTS", "CATALOG USE", "USE-CATALOG"])
def test_privilege_parse_rejects_unknown_names(text: str) -> None:
    with pytest.raises(ValueError, match="unknown privilege") as error:
        Privilege.parse(text)
    message = str(error.value)
    assert repr(text) in message
    assert all(p.value in message for p in Privilege)


def test_privilege_renders_as_its_sql_name() -> None:
    assert [str(p) for p in Privilege] == [p.value for p in Privilege]
    assert str(P.USE_CATALOG) == f"{P.USE_CATALOG}" == "USE CATALOG"


@pytest.mark.parametrize("principal", ["alice", "alice@example.com", "data scientists", "a" * 255, "j\u00fcrgen"])
def test_validate_principal_accepts_names(principal: str) -> None:
    assert validate_principal(principal) == principal


@pytest.mark.parametrize(
    "principal",
    ["", "  ", " alice", "alice ", "a\x00b", "a\nb", "a\x7fb", "a" * 256, None, 42, b"alice"],
)
def test_validate_principal_rejects_bad_names(principal: object) -> None:
    with pytest.raises(ValueError, match="invalid principal"):
        validate_principal(principal)  # type: ignore[arg-type]


# --- visibility in listings -------------------------------------------------------------------------

EXPECTED_APPLIES_TO: dict[Privilege, frozenset[SecurableKind]] = {
    P.USE_CATALOG: frozenset({SecurableKind.CATALOG}),
    P.CREATE_SCHEMA: frozenset({SecurableKind.CATALOG}),
    P.USE_SCHEMA: frozenset({SecurableKind.SCHEMA}),
    P.CREATE_TABLE: frozenset({SecurableKind.SCHEMA}),
    P.CREATE_VOLUME: frozenset({SecurableKind.SCHEMA}),
    P.SELECT: frozenset({SecurableKind.TABLE}),
    P.MODIFY: frozenset({SecurableKind.TABLE}),
    P.READ_VOLUME: frozenset({SecurableKind.VOLUME}),
    P.WRITE_VOLUME: frozenset({SecurableKind.VOLUME}),
    P.ALL_PRIVILEGES: frozenset(
        {SecurableKind.CATALOG, SecurableKind.SCHEMA, SecurableKind.TABLE, SecurableKind.VOLUME}
    ),
    P.CREATE_CATALOG: frozenset({SecurableKind.METASTORE}),
    P.CREATE_STORAGE_CREDENTIAL: frozenset({SecurableKind.METASTORE}),
    P.CREATE_EXTERNAL_LOCATION: frozenset({SecurableKind.METASTORE, SecurableKind.STORAGE_CREDENTIAL}),
    P.CREATE_EXTERNAL_TABLE: frozenset({SecurableKind.EXTERNAL_LOCATION}),
    P.CREATE_EXTERNAL_VOLUME: frozenset({SecurableKind.EXTERNAL_LOCATION}),
    P.READ_FILES: frozenset({SecurableKind.EXTERNAL_LOCATION}),
    P.WRITE_FILES: frozenset({SecurableKind.EXTERNAL_LOCATION}),
}
OBJECT_KINDS = {
    MAIN: SecurableKind.CATALOG,
    SCHEMA_A: SecurableKind.SCHEMA,
    SCHEMA_B: SecurableKind.SCHEMA,
    TABLE_1: SecurableKind.TABLE,
    TABLE_2: SecurableKind.TABLE,
    VOLUME: SecurableKind.VOLUME,
}
OBJECTS = {name: (kind, "admin") for name, kind in OBJECT_KINDS.items()}


def test_applies_to_matches_the_privilege_kinds() -> None:
    assert dict(APPLIES_TO) == EXPECTED_APPLIES_TO


@pytest.mark.parametrize(
    ("grants", "expected"),
    [
        pytest.param(set(), set(), id="nothing"),
        pytest.param({Grant(TABLE_1, P.SELECT, ALICE)}, {MAIN, SCHEMA_A, TABLE_1}, id="table-shows-its-containers"),
        pytest.param({Grant(MAIN, P.USE_CATALOG, ALICE)}, {MAIN}, id="use-catalog-shows-only-the-catalog"),
        pytest.param({Grant(SCHEMA_A, P.USE_SCHEMA, ALICE)}, {MAIN, SCHEMA_A}, id="use-schema"),
        pytest.param({Grant(MAIN, P.USE_SCHEMA, ALICE)}, {MAIN, SCHEMA_A, SCHEMA_B}, id="use-schema-on-catalog"),
        pytest.param({Grant(SCHEMA_A, P.SELECT, ALICE)}, {MAIN, SCHEMA_A, TABLE_1}, id="select-on-schema"),
        pytest.param({Grant(MAIN, P.READ_VOLUME, ALICE)}, {MAIN, SCHEMA_A, VOLUME}, id="read-volume-on-catalog"),
        pytest.param({Grant(MAIN, P.SELECT, ALICE)}, {MAIN, SCHEMA_A, SCHEMA_B, TABLE_1, TABLE_2}, id="select-on-cat"),
        pytest.param({Grant(MAIN, P.ALL_PRIVILEGES, ALICE)}, set(OBJECTS), id="all-privileges-on-catalog"),
        pytest.param({Grant(SCHEMA_B, P.ALL_PRIVILEGES, ALICE)}, {MAIN, SCHEMA_B, TABLE_2}, id="all-on-schema-b"),
        pytest.param({Grant(TABLE_1, P.SELECT, BOB)}, set(), id="another-principal"),
    ],
)
def test_visible_examples(grants: set[Grant], expected: set[SecurableName]) -> None:
    assert visible(ALICE, OBJECTS, grants) == expected


@pytest.mark.parametrize(
    ("owned", "expected"),
    [
        (MAIN, set(OBJECTS)),
        (SCHEMA_A, {MAIN, SCHEMA_A, TABLE_1, VOLUME}),
        (TABLE_2, {MAIN, SCHEMA_B, TABLE_2}),
    ],
)
def test_owners_see_what_they_own_and_everything_inside(owned: SecurableName, expected: set[SecurableName]) -> None:
    objects = {**OBJECTS, owned: (OBJECT_KINDS[owned], ALICE)}
    assert visible(ALICE, objects, ()) == expected
    assert visible(BOB, objects, ()) == set()


def visible_oracle(
    principal: str, objects: Mapping[SecurableName, tuple[SecurableKind, str]], grants: frozenset[Grant]
) -> set[SecurableName]:
    def shown(name: SecurableName, kind: SecurableKind) -> bool:
        levels = lineage_of(name)
        owned = any(objects[level][1] == principal for level in levels if level in objects)
        reached = any(
            g.principal == principal and g.securable in levels and kind in EXPECTED_APPLIES_TO[g.privilege]
            for g in grants
        )
        return owned or reached

    return {level for name, (kind, _) in objects.items() if shown(name, kind) for level in lineage_of(name)}


@settings(max_examples=150)
@given(
    st.frozensets(st.sampled_from(ALL_GRANTS), max_size=6),
    st.dictionaries(st.sampled_from(list(OBJECT_KINDS)), st.sampled_from([ALICE, BOB, "admin"])),
    st.sets(st.sampled_from(list(OBJECT_KINDS)), min_size=1),
)
def test_visible_matches_the_brute_force_oracle(
    grants: frozenset[Grant], owners: dict[SecurableName, str], present: set[SecurableName]
) -> None:
    objects = {name: (OBJECT_KINDS[name], owners.get(name, "admin")) for name in present}
    for principal in (ALICE, BOB):
        assert visible(principal, objects, grants) == visible_oracle(principal, objects, grants)


# --- one object at a time, from its lineage and what lies below it ---------------------------------

# Two catalogs of two schemas, each holding a table and a volume.
TREE: dict[SecurableName, SecurableKind] = {}
for _c in ("c0", "c1"):
    TREE[parse_name(_c)] = SecurableKind.CATALOG
    for _s in ("s0", "s1"):
        TREE[parse_name(f"{_c}.{_s}")] = SecurableKind.SCHEMA
        TREE[parse_name(f"{_c}.{_s}.t")] = SecurableKind.TABLE
        TREE[parse_name(f"{_c}.{_s}.v")] = SecurableKind.VOLUME
TREE_GRANTS = [Grant(n, p, u) for n in TREE for p in DATA_PRIVILEGES for u in (ALICE, BOB)]


def strictly_below(name: SecurableName, other: SecurableName) -> bool:
    return len(other.parts) > len(name.parts) and other.parts[: len(name.parts)] == name.parts


def lineage_facts(
    name: SecurableName, objects: Mapping[SecurableName, tuple[SecurableKind, str]], grants: Iterable[Grant]
) -> AccessFacts:
    levels = set(name.lineage())
    return AccessFacts(
        owners={level: objects[level][1] for level in levels if level in objects},
        grants=frozenset(g for g in grants if g.securable in levels),
    )


def whole_subtree(
    principal: str,
    name: SecurableName,
    objects: Mapping[SecurableName, tuple[SecurableKind, str]],
    grants: Iterable[Grant],
) -> Subtree:
    """Everything below ``name`` the rule could ask about, read faithfully from the world."""
    below = frozenset(g for g in grants if g.principal == principal and strictly_below(name, g.securable))

    def kinds_in(level: SecurableName) -> frozenset[SecurableKind]:
        return frozenset(k for n, (k, _) in objects.items() if n == level or strictly_below(level, n))

    return Subtree(
        owned=any(owner == principal for n, (_, owner) in objects.items() if strictly_below(name, n)),
        grants=below,
        kinds={level: kinds_in(level) for level in {name, *(g.securable for g in below)}},
    )


def needed_subtree(
    principal: str,
    name: SecurableName,
    objects: Mapping[SecurableName, tuple[SecurableKind, str]],
    grants: Iterable[Grant],
) -> Subtree:
    """Only what the metastore reads: kinds asked only for what the privileges involved apply to,
    grants only on objects that exist (the metastore joins them to their rows)."""
    whole = whole_subtree(principal, name, objects, grants)
    on_lineage = lineage_facts(name, objects, grants).grants
    wanted = frozenset().union(*(APPLIES_TO[g.privilege] for g in on_lineage if g.principal == principal))
    kept = frozenset(g for g in whole.grants if g.securable in objects)
    kinds = {name: whole.kinds[name] & wanted}
    for level in {g.securable for g in kept}:
        applies = frozenset().union(*(APPLIES_TO[g.privilege] for g in kept if g.securable == level))
        kinds[level] = frozenset({objects[level][0]}) | (whole.kinds[level] & applies)
    return Subtree(owned=whole.owned, grants=kept, kinds=kinds)


world = st.tuples(
    st.frozensets(st.sampled_from(TREE_GRANTS), max_size=6),
    st.dictionaries(st.sampled_from(list(TREE)), st.sampled_from([ALICE, BOB, "admin"]), max_size=4),
    st.sets(st.sampled_from(list(TREE)), min_size=1),
)


def objects_of(
    owners: Mapping[SecurableName, str], present: Iterable[SecurableName]
) -> dict[SecurableName, tuple[SecurableKind, str]]:
    return {name: (TREE[name], owners.get(name, "admin")) for name in present}


def closed(present: Iterable[SecurableName]) -> set[SecurableName]:
    return {level for name in present for level in name.lineage()}


@settings(max_examples=200)
@given(world)
def test_visible_one_matches_visible_over_everything(
    case: tuple[frozenset[Grant], dict[SecurableName, str], set[SecurableName]],
) -> None:
    grants, owners, present = case
    objects = objects_of(owners, present)
    for principal in (ALICE, BOB):
        everything = visible(principal, objects, grants)
        for name, (kind, _) in objects.items():
            facts = lineage_facts(name, objects, grants)
            below = whole_subtree(principal, name, objects, grants)
            assert visible_one(principal, name, kind, facts, below) == (name in everything), name
            # Without the subtree it may say no too often, never yes: the lineage alone is a safe first look.
            assert not visible_one(principal, name, kind, facts) or name in everything


@settings(max_examples=200)
@given(world)
def test_what_the_metastore_reads_below_is_enough(
    case: tuple[frozenset[Grant], dict[SecurableName, str], set[SecurableName]],
) -> None:
    grants, owners, present = case
    objects = objects_of(owners, closed(present))  # a metastore's rows always have their containers
    grants = frozenset(g for g in grants if g.securable in objects)  # grants go with their rows
    for principal in (ALICE, BOB):
        everything = visible(principal, objects, grants)
        for name, (kind, _) in objects.items():
            below = needed_subtree(principal, name, objects, grants)
            shown = visible_one(principal, name, kind, lineage_facts(name, objects, grants), below)
            assert shown == (name in everything), name


def test_select_on_a_catalog_shows_it_only_when_it_holds_a_table() -> None:
    main = parse_name("c0")
    facts = AccessFacts(owners={main: "admin"}, grants=frozenset({Grant(main, P.SELECT, ALICE)}))
    assert not visible_one(ALICE, main, SecurableKind.CATALOG, facts)
    tables = Subtree(kinds={main: frozenset({SecurableKind.TABLE})})
    assert visible_one(ALICE, main, SecurableKind.CATALOG, facts, tables)
    volumes = Subtree(kinds={main: frozenset({SecurableKind.VOLUME})})
    assert not visible_one(ALICE, main, SecurableKind.CATALOG, facts, volumes)
