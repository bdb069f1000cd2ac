"""spec.policy.ignore without a database: the one matcher, its entries' validation, and
the PostgreSQL split of a managed kind (tests/engines/test_pg_ignore.py runs it on a
real server)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ptah.api.common import Policy
from ptah.engines.model import Unmanaged, ignore_matcher, refuse_unmanaged
from ptah.engines.postgres import ignore as pgignore


@pytest.mark.parametrize(
    ("entry", "item", "covered"),
    [
        ("publication", "publication dbz_publication", True),
        ("publication", "publication relation public.t in publication dbz", True),
        ("publication dbz_publication", "publication dbz_publication", True),
        ("publication dbz", "publication dbz_publication", False),  # a whole word
        ("publication dbz_*", "publication dbz_publication", True),
        ("publication dbz_*", "publication app_pub", False),
        ("publication *_cdc", "publication orders_cdc", True),
        ("publication *_cdc", "publication orders_cdc2", False),
        ("operator", "operator public.===(integer,integer)", True),
        ("operator public.===(integer,integer)", "operator public.===(integer,integer)", True),
        ("function public.f(integer[])", "function public.f(integer[])", True),  # [ is plain
        ("function public.f(.)", "function public.f(x)", False),  # . is plain
        ("text search template", "text search dictionary public.d", False),
    ],
)
def test_matcher(entry: str, item: str, covered: bool) -> None:
    assert (ignore_matcher([entry])(item) == entry) is covered


def test_unmanaged_kinds_use_the_same_matcher() -> None:
    desired: dict[str, Any] = {"_meta": {"unmanaged": ["operator public.+(a,b)", "cast (x)"]}}
    refuse_unmanaged(desired, ["operator public.*", "cast"])
    with pytest.raises(Unmanaged, match="cast"):
        refuse_unmanaged(desired, ["operator public.*"])


@pytest.mark.parametrize("bad", ["", "*", "* x", " publication", "publication ", "a\nb"])
def test_entries_are_validated(bad: str) -> None:
    with pytest.raises(ValidationError):
        Policy.model_validate({"ignore": [bad]})
    assert Policy.model_validate({"ignore": ["publication dbz_*"]}).ignore == ["publication dbz_*"]


def _schema() -> dict[str, Any]:
    pub = {"allTables": False, "publish": "insert", "viaRoot": False}
    member = {"publication": "dbz", "table": "public.t", "where": None, "columns": []}
    return {
        "table": {"public.t": {"columns": {}}},
        "publication": {"dbz": pub, "app": dict(pub)},
        "pub_table": {"dbz public.t": member, "app public.t": {**member, "publication": "app"}},
        "pub_schema": {},
        "comment": {
            "PUBLICATION dbz": {"on": "PUBLICATION dbz", "node": "publication:dbz", "text": "x"}
        },
        "acl": {},
        "_owners": {"publication:dbz": "debezium", "publication:app": "app"},
        "_deps": {
            "pub_table:dbz public.t": {"publication:dbz": "a", "table:public.t": "a"},
            "pub_table:app public.t": {"publication:app": "a", "table:public.t": "a"},
        },
        "_meta": {"unmanaged": [], "heldBy": {}},
    }


def test_split_takes_out_what_goes_with_an_ignored_publication() -> None:
    schema = _schema()
    kept, left, named = pgignore.split(schema, ignore_matcher(["publication dbz*"]))
    assert named == ["publication dbz (publication dbz*)"]
    assert set(kept["publication"]) == {"app"} and set(kept["pub_table"]) == {"app public.t"}
    assert set(left["publication"]) == {"dbz"} and set(left["pub_table"]) == {"dbz public.t"}
    assert kept["comment"] == {} and set(left["comment"]) == {"PUBLICATION dbz"}
    assert kept["_owners"] == {"publication:app": "app"}
    assert kept["_meta"]["heldBy"] == {
        "table:public.t": ["publication relation public.t in publication dbz (ignored)"]
    }
    assert schema == _schema()  # not changed


def test_split_of_what_nothing_covers_is_the_schema() -> None:
    schema = _schema()
    assert pgignore.split(schema, ignore_matcher(["operator"])) == (schema, {}, [])


def test_a_serial_sequence_goes_with_its_ignored_table() -> None:
    seq = {"ownedBy": 'public."hb.x"."a.b"'}
    schema: dict[str, Any] = {
        "table": {'public."hb.x"': {"columns": {}}, "public.t": {"columns": {}}},
        "sequence": {"public.s": seq, "public.own": {"ownedBy": None}},
        "_deps": {},
    }
    kept, left, _ = pgignore.split(schema, ignore_matcher(['table public."hb.x"']))
    assert set(left["sequence"]) == {"public.s"} and set(kept["sequence"]) == {"public.own"}


class _Ops:
    split_ignored = staticmethod(pgignore.split)


def test_the_planner_refuses_the_desired_side_and_splits_the_target() -> None:
    from ptah.engines import planner
    from ptah.engines.model import IgnoredInDesired, PlanError, SchemaPolicy

    policy = SchemaPolicy(ignore=("publication dbz",))
    kept, left, named = planner._split_ignored(_Ops(), _schema(), {"publication": {}}, policy)
    assert named == ["publication dbz (publication dbz)"] and set(left["publication"]) == {"dbz"}
    assert set(kept["publication"]) == {"app"}
    with pytest.raises(IgnoredInDesired, match=r"publication dbz \(publication dbz\)"):
        planner._split_ignored(_Ops(), _schema(), _schema(), policy)
    with pytest.raises(PlanError, match="not supported on this engine"):
        planner._split_ignored(object(), _schema(), {}, policy)
    assert planner._split_ignored(object(), _schema(), {}, SchemaPolicy()) == (_schema(), {}, [])
