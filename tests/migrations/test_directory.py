"""The directory reader and the sum file, without a database."""

from __future__ import annotations

from pathlib import Path

import pytest
from migsupport import write_dir

from ptah.engines.versioned import sumfile
from ptah.engines.versioned.directory import SUM_FILE, DirectoryError, Version, read_directory


def test_versions_order_numerically_by_dotted_parts(tmp_path: Path) -> None:
    d = write_dir(
        tmp_path,
        {
            "10_ten.sql": "SELECT 1;",
            "2_two.sql": "SELECT 1;",
            "1.10_one_ten.sql": "SELECT 1;",
            "1.2_one_two.sql": "SELECT 1;",
            "V3_1__flyway_style.sql": "SELECT 1;",
        },
        sums=False,
    )
    files = read_directory([d]).files
    assert [str(f.version) for f in files] == ["1.2", "1.10", "2", "3.1", "10"]
    assert files[3].description == "flyway style"


def test_leading_and_trailing_zeros_are_one_version(tmp_path: Path) -> None:
    assert Version.parse("0001") == Version.parse("1.0") == Version.parse("1")
    write_dir(tmp_path, {"0001_a.sql": "SELECT 1;", "1_b.sql": "SELECT 1;"}, sums=False)
    with pytest.raises(DirectoryError, match="appears twice"):
        read_directory([tmp_path])


def test_merged_directories_reject_a_duplicate_version(tmp_path: Path) -> None:
    a = write_dir(tmp_path / "a", {"1_a.sql": "SELECT 1;"}, sums=False)
    b = write_dir(tmp_path / "b", {"2_b.sql": "SELECT 2;"}, sums=False)
    c = write_dir(tmp_path / "c", {"V2__c.sql": "SELECT 3;"}, sums=False)
    assert [str(f.version) for f in read_directory([a, b]).files] == ["1", "2"]
    with pytest.raises(DirectoryError, match=r"version 2 appears twice: .*b/2_b.sql and .*c/V2__c"):
        read_directory([a, b, c])


def test_configmap_mount_noise_is_ignored_bad_names_are_not(tmp_path: Path) -> None:
    d = write_dir(tmp_path, {"1_a.sql": "SELECT 1;", "README.md": "hi"}, sums=False)
    (d / "..2026_11_30").mkdir()
    (d / "..data").symlink_to(d / "..2026_11_30")
    assert len(read_directory([d]).files) == 1
    (d / "oops.sql").write_text("SELECT 1;")
    with pytest.raises(DirectoryError, match="not a migration file name"):
        read_directory([d])
    (d / "oops.sql").unlink()
    (d / "R__view.sql").write_text("SELECT 1;")
    (d / "U1__a.sql").write_text("DROP TABLE a;")
    read = read_directory([d])
    assert [f.name for f in read.repeatables] == ["R__view.sql"]
    assert [f.name for f in read.undo] == ["U1__a.sql"]
    assert [f.name for f in read.summed] == ["1_a.sql", "R__view.sql", "U1__a.sql"]


def test_repeatables_merge_in_name_order_and_may_not_repeat(tmp_path: Path) -> None:
    a = write_dir(tmp_path / "a", {"V1__a.sql": "SELECT 1;", "R__b_view.sql": "1"}, sums=False)
    b = write_dir(tmp_path / "b", {"R__a_funcs.sql": "2", "U1__a.sql": "3"}, sums=False)
    merged = read_directory([a, b])
    assert [f.name for f in merged.repeatables] == ["R__a_funcs.sql", "R__b_view.sql"]
    assert merged.repeatables[0].description == "a funcs"
    c = write_dir(tmp_path / "c", {"R__b_view.sql": "other"}, sums=False)
    with pytest.raises(DirectoryError, match=r"R__b_view\.sql appears twice"):
        read_directory([a, c])


def test_sum_file_covers_repeatable_and_undo_files(tmp_path: Path) -> None:
    d = write_dir(tmp_path, {"V1__a.sql": "SELECT 1;", "R__v.sql": "SELECT 2;"})
    assert sumfile.problems(read_directory([d])) == []
    (d / "R__v.sql").write_text("SELECT 3;")
    assert sumfile.problems(read_directory([d])) == [
        f"R__v.sql: edited since {SUM_FILE} was written"
    ]
    (d / "R__v.sql").write_text("SELECT 2;")
    (d / "U1__a.sql").write_text("DROP TABLE a;")
    assert "U1__a.sql: added after the last file" in sumfile.problems(read_directory([d]))[0]


def test_no_transaction_directive_only_in_leading_comments(tmp_path: Path) -> None:
    d = write_dir(
        tmp_path,
        {
            "1_a.sql": "-- builds an index\n-- ptah:no-transaction\nCREATE INDEX ...;",
            "2_b.sql": "SELECT 1;\n-- ptah:no-transaction\n",
        },
        sums=False,
    )
    a, b = read_directory([d]).files
    assert not a.transactional
    assert b.transactional
    (d / "3_c.sql").write_text("-- ptah:no-transactions\nSELECT 1;")
    with pytest.raises(DirectoryError, match="unknown directive"):
        read_directory([d])


@pytest.fixture
def hashed(tmp_path: Path) -> Path:
    return write_dir(
        tmp_path,
        {"1_a.sql": "CREATE TABLE a (id int);", "2_b.sql": "CREATE TABLE b (id int);"},
    )


def test_sum_file_round_trip(hashed: Path) -> None:
    assert sumfile.problems(read_directory([hashed])) == []
    assert (hashed / "ptah.sum").read_text().startswith("ptah-sum v1 h1:")


def test_edited_file_is_named(hashed: Path) -> None:
    (hashed / "1_a.sql").write_text("CREATE TABLE a (id bigint);")
    problems = sumfile.problems(read_directory([hashed]))
    assert problems == ["1_a.sql: edited since ptah.sum was written"]


def test_inserted_removed_appended_files_are_named(hashed: Path) -> None:
    (hashed / "1.5_mid.sql").write_text("SELECT 1;")
    assert sumfile.problems(read_directory([hashed])) == ["1.5_mid.sql: inserted before 2_b.sql"]
    (hashed / "1.5_mid.sql").unlink()
    (hashed / "3_c.sql").write_text("SELECT 1;")
    assert "3_c.sql: added after" in sumfile.problems(read_directory([hashed]))[0]
    (hashed / "3_c.sql").unlink()
    (hashed / "1_a.sql").unlink()
    assert sumfile.problems(read_directory([hashed]))[0].startswith("1_a.sql: removed")


def test_renamed_version_reorders(hashed: Path) -> None:
    (hashed / "2_b.sql").rename(hashed / "0_b.sql")
    problems = sumfile.problems(read_directory([hashed]))
    assert problems and "0_b.sql" in problems[0]


def test_hand_edited_sum_header_is_caught(hashed: Path) -> None:
    text = (hashed / "ptah.sum").read_text().splitlines()
    text[1] = text[1][:-4] + "0000"
    (hashed / "ptah.sum").write_text("\n".join(text) + "\n")
    problems = sumfile.problems(read_directory([hashed]))
    assert any("header does not match" in p for p in problems)


def test_missing_sum_file(tmp_path: Path) -> None:
    d = write_dir(tmp_path, {"1_a.sql": "SELECT 1;"}, sums=False)
    assert "no ptah.sum" in sumfile.problems(read_directory([d]))[0]
