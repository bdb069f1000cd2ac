"""A file as ``mariadb-dump`` writes it plans as the native client loads it.

Since 10.11.8 (and 10.5.25, 10.6.18, 11.x) mariadb-dump opens each dump with
``/*M!999999\\- enable the sandbox mode */``: a command to its own client, which the
server (99.99.99 is above every version) skips as a comment.
"""

from __future__ import annotations

import pytest

from ptah.engines import planner
from ptah.engines.confine import StatementRefused
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

DUMP = """/*M!999999\\- enable the sandbox mode */ \n-- MariaDB dump 10.19  Distrib 10.11.19-MariaDB
--
-- Host: 127.0.0.1    Database: shop
-- ------------------------------------------------------

/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET @OLD_CHARACTER_SET_RESULTS=@@CHARACTER_SET_RESULTS */;
/*!40101 SET @OLD_COLLATION_CONNECTION=@@COLLATION_CONNECTION */;
/*!40101 SET NAMES utf8mb4 */;
/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;

/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `item` (
  `id` int(11) NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;
/*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;
/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
/*!40101 SET CHARACTER_SET_RESULTS=@OLD_CHARACTER_SET_RESULTS */;
/*!40101 SET COLLATION_CONNECTION=@OLD_COLLATION_CONNECTION */;

-- Dump completed on 2026-01-01 00:00:00
"""


def test_a_dump_with_the_sandbox_line_plans(mysql_db: str) -> None:
    with open_target(mysql_db) as t:
        plan = planner.plan(t, DUMP)
    assert [s.sql.split("(")[0].strip() for s in plan.statements] == ["CREATE TABLE `item`"]


@pytest.mark.parametrize(
    "hidden",
    [
        "/*M!999999 DROP DATABASE IF EXISTS ptah_absent */;",
        "/*M!999999 ; DROP DATABASE IF EXISTS ptah_absent; */ SELECT 1;",
        "/*M!999999\\- x */ /*!40101 DROP DATABASE IF EXISTS ptah_absent */;",
        # A comment the server skips (its version is above the server's, or MySQL's)
        # is no prefix of the statement after it: the server runs that statement.
        "/*!99999 x */ DROP DATABASE IF EXISTS ptah_absent;",
        "/*M!999999\\- x */ DROP DATABASE IF EXISTS ptah_absent;",
        "/*!80016 x */ /*!40101 DROP DATABASE IF EXISTS ptah_absent */;",
    ],
)
def test_a_skipped_versioned_comment_hides_nothing(mysql_db: str, hidden: str) -> None:
    with open_target(mysql_db) as t, pytest.raises(StatementRefused) as err:
        planner.plan(t, DUMP + hidden + "\n")
    assert "acts on a whole database" in str(err.value)
