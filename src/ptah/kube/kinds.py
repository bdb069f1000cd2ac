"""The resource kinds Ptah reads and writes, named once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    has_status: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


PTAH_GROUP = "ptah.io"
PTAH_VERSION = "v1alpha1"

SCHEMA = Kind(PTAH_GROUP, PTAH_VERSION, "PtahSchema", "ptahschemas")
MIGRATION = Kind(PTAH_GROUP, PTAH_VERSION, "PtahMigration", "ptahmigrations")
PLAN = Kind(PTAH_GROUP, PTAH_VERSION, "PtahPlan", "ptahplans")
APPROVAL = Kind(PTAH_GROUP, PTAH_VERSION, "PtahApproval", "ptahapprovals")
ROLLOUT = Kind(PTAH_GROUP, PTAH_VERSION, "PtahRollout", "ptahrollouts")
JOB = Kind("batch", "v1", "Job", "jobs")
POD = Kind("", "v1", "Pod", "pods")
CONFIGMAP = Kind("", "v1", "ConfigMap", "configmaps", has_status=False)
SECRET = Kind("", "v1", "Secret", "secrets", has_status=False)
EVENT = Kind("", "v1", "Event", "events", has_status=False)
LEASE = Kind("coordination.k8s.io", "v1", "Lease", "leases", has_status=False)

ALL = (SCHEMA, MIGRATION, PLAN, APPROVAL, ROLLOUT, JOB, POD, CONFIGMAP, SECRET, EVENT, LEASE)


def by_kind(kind: str) -> Kind:
    for k in ALL:
        if k.kind == kind:
            return k
    raise KeyError(kind)
