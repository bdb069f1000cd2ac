"""PtahRollout: one PtahSchema or PtahMigration template across many targets, in waves.

The rollout never runs anything. It writes child resources (one PtahSchema or
PtahMigration per target, owned by the rollout, each keeping the whole mutation
lifecycle: claim, dispatch boundary, realm Lease, proof before release), spends a
person's rollout-level decision by creating each child's own PtahApproval bound to
that child's plan digest, deletes the child of a removed target once it owes
nothing, and publishes where the fleet stands.

Nothing about progress is kept anywhere but in the children: a child carries the
template revision and the wave it was started in (annotations written with its
spec), so a restarted operator derives the current wave, the stop and the next
step from what it reads, and loses nothing.

The rules, in one place:

* targets are ordered (explicit list first, in its order; then selected Secrets by
  creation time and name), so a Secret added later joins the next wave started;
* wave 0 is the canary (``strategy.canary`` targets, or ``canaryPercent``); then
  waves of at most ``maxParallel`` targets; a wave starts once the previous one is
  done: every canary target Ready; every other target Ready, failed within
  ``maxFailures``, or waiting for its own decision (a plan no rollout approval covers);
* the rollout stops (starts nothing, spends no approval) on a failed canary target,
  on more than ``maxFailures`` failed targets, or on any uncertain outcome
  (``stopOnUncertain``); ``paused`` holds it the same way;
* a rollout approval names a statements digest; it is spent once per target whose
  plan has exactly those statements: the child's approval is named after the pair
  (rollout approval, child), so creating it twice is impossible.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from ptah.api.digest import digest
from ptah.api.resources import (
    LabelSelector,
    PlanSpec,
    PtahApproval,
    RolloutCounts,
    RolloutDecision,
    RolloutSpec,
    RolloutStatus,
    RolloutStop,
    RolloutTargetStatus,
    approval_consumed,
    statements_digest,
)
from ptah.kube import errors
from ptah.kube.clock import rfc3339
from ptah.kube.kinds import APPROVAL, MIGRATION, PLAN, ROLLOUT, SCHEMA, SECRET, Kind
from ptah.kube.merge import merge_diff
from ptah.kube.port import Cluster, Obj
from ptah.lifecycle.authorize import plan_digest
from ptah.lifecycle.context import Env, ObjectPass
from ptah.lifecycle.family import Watch
from ptah.lifecycle.report import PassReport
from ptah.lifecycle.step import Result
from ptah.workload.names import label_safe

LABEL_ROLLOUT = "ptah.io/rollout"
LABEL_ROLLOUT_APPROVAL = "ptah.io/rollout-approval"
ANN_TARGET = "ptah.io/rollout-target"
ANN_REVISION = "ptah.io/rollout-revision"
ANN_WAVE = "ptah.io/rollout-wave"
ENGINE_LABEL = "ptah.io/engine"

CHILD_KINDS: dict[str, Kind] = {SCHEMA.kind: SCHEMA, MIGRATION.kind: MIGRATION}
RECORD_FIELDS = ("pendingObservation", "unresolvedRun")

# The durable writes a rollout makes (the crash tests stop the operator around them).
ROLLOUT_WRITES = (
    "rollout_start_child",
    "rollout_approve_child",
    "rollout_delete_child",
    "rollout_write_status",
)

# Phases of a target, for the current revision (status.counts has one field each).
READY, APPLYING, WAITING, UNCERTAIN, FAILED, PENDING = (
    "Ready",
    "Applying",
    "WaitingForApproval",
    "Uncertain",
    "Failed",
    "Pending",
)


@dataclass(frozen=True)
class Target:
    """One database the template goes to: a Secret (and its key) of the namespace."""

    name: str
    secret: str
    key: str
    engine: str


@dataclass
class Child:
    """A target's child resource as read this pass, and what the rollout makes of it."""

    target: Target
    obj: Obj | None
    at_revision: bool = False
    wave: int | None = None
    phase: str = PENDING
    reason: str = ""
    message: str = ""
    plan: tuple[str, str] | None = None  # (name, digest) of the plan it waits on
    statements: str | None = None  # statements digest of that plan
    parked: bool = False  # waits for a decision no rollout approval covers


@dataclass
class View:
    """Everything one pass read, and the decisions derived from it."""

    spec: RolloutSpec
    raw: dict[str, Any]
    revision: str
    children: list[Child]
    orphans: list[Obj]
    approvals: list[Obj]
    notes: list[tuple[str, str, bool]] = field(default_factory=list)  # Events to emit


# ------------------------------------------------------------------ targets


def _target_name(secret: str, key: str, default_key: str) -> str:
    return secret if key == default_key else f"{secret}/{key}"


def resolve_targets(cluster: Cluster, namespace: str, spec: RolloutSpec) -> list[Target]:
    """The ordered target set: listed Secrets first, in their order, then the Secrets the
    selector picks by creation time (so a new one comes last), each once. Only Secret
    metadata is read."""
    sel = spec.targets
    out: list[Target] = []
    seen: set[tuple[str, str]] = set()
    for entry in sel.secrets:
        ident = (entry.secret_ref.name, entry.secret_ref.key)
        if ident in seen:
            continue
        seen.add(ident)
        name = _target_name(ident[0], ident[1], sel.secret_key)
        out.append(Target(name, ident[0], ident[1], entry.engine or spec.template.engine))
    if sel.selector is not None:
        out.extend(_selected(cluster, namespace, spec, sel.selector, seen))
    return out


def _selected(
    cluster: Cluster,
    namespace: str,
    spec: RolloutSpec,
    selector: LabelSelector,
    seen: set[tuple[str, str]],
) -> list[Target]:
    found = []
    for obj in cluster.list_metadata(SECRET, namespace, selector.match_labels or None):
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        if meta.get("deletionTimestamp") or not selector.matches(labels):
            continue
        ident = (str(meta["name"]), spec.targets.secret_key)
        if ident in seen:
            continue
        seen.add(ident)
        engine = labels.get(ENGINE_LABEL) or spec.template.engine
        if engine not in ("postgres", "mysql", "sqlite"):
            engine = spec.template.engine
        found.append((str(meta.get("creationTimestamp") or ""), ident[0], engine))
    found.sort()
    return [Target(name, name, spec.targets.secret_key, engine) for _, name, engine in found]


def child_name(rollout: str, target: Target) -> str:
    """``<rollout>-<target>``, DNS-safe and at most 63 characters; a hash keeps two long
    names that share a prefix apart."""
    plain = label_safe(f"{rollout}-{target.name}", 63)
    if plain == f"{rollout}-{target.name}":
        return plain
    return f"{label_safe(f'{rollout}-{target.name}', 52)}-{digest(target.name, 10)}"


def _label_value(text: str) -> str:
    return text if len(text) <= 63 else f"{label_safe(text, 52)}-{digest(text, 10)}"


# ------------------------------------------------------------------ children


def template_body(raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(child kind, the child's spec without its target), from the rollout's spec as
    written: what the person wrote passes through unchanged, so a child's runner settings
    fall back to the installation's defaults exactly as a hand-written resource's do."""
    template = raw["template"]
    if template.get("schema") is not None:
        return SCHEMA.kind, dict(template["schema"])
    return MIGRATION.kind, dict(template["migration"])


def revision_of(raw: dict[str, Any]) -> str:
    template = raw["template"]
    return digest([template, raw["targets"].get("secretKey", "url")], 16)


def desired_spec(raw: dict[str, Any], target: Target) -> dict[str, Any]:
    _, body = template_body(raw)
    tgt: dict[str, Any] = {
        "engine": target.engine,
        "secretRef": {"name": target.secret, "key": target.key},
    }
    dev = raw["template"].get("devSecretRef")
    if dev:
        tgt["devSecretRef"] = dev
    return {**body, "target": tgt}


def _aims_at(obj: Obj, target: Target) -> bool:
    """The child's spec names exactly this target (engine, Secret and key): a child
    edited, or written by someone else, to aim elsewhere is not at the revision, so the
    rollout rewrites it before it spends any decision on it."""
    spec_target = (obj.get("spec") or {}).get("target") or {}
    ref = spec_target.get("secretRef") or {}
    return (
        spec_target.get("engine") == target.engine
        and ref.get("name") == target.secret
        and (ref.get("key") or "url") == target.key
    )


def _owned_by(obj: Obj, uid: str) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("kind") == ROLLOUT.kind for r in refs)


def _cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in status.get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def owes_nothing(obj: Obj) -> bool:
    """No claim, no uncertainty record, no staged release: nothing the lifecycle owes."""
    status = obj.get("status") or {}
    keys = ("activeOperation", "pendingLockRelease", *RECORD_FIELDS)
    return not any(status.get(k) for k in keys)


def classify(child: Child) -> None:
    """The target's phase for the current revision, from its child's status."""
    obj = child.obj
    if obj is None or not child.at_revision:
        child.phase = PENDING
        return
    status = obj.get("status") or {}
    generation = int(obj["metadata"].get("generation") or 1)
    record = next((status[f] for f in RECORD_FIELDS if status.get(f)), None)
    stalled = _cond(status, "Stalled")
    ready = _cond(status, "Ready")
    if record is not None:
        child.phase = UNCERTAIN
        child.reason = str(record.get("reason") or "OutcomeUncertain")
        child.message = str(record.get("detail") or "")[:300]
    elif status.get("observedGeneration") != generation:
        child.phase = APPLYING  # started; its lifecycle has not looked at this spec yet
    elif stalled.get("status") == "True":
        child.phase = FAILED
        child.reason = str(stalled.get("reason") or status.get("phase") or "Stalled")
        child.message = str(stalled.get("message") or "")[:300]
    elif ready.get("status") == "True" and not status.get("activeOperation"):
        child.phase = READY
    elif status.get("phase") == "WaitingForApproval":
        child.phase = WAITING
        plan = status.get("currentPlan") or {}
        if plan.get("name") and plan.get("digest"):
            child.plan = (str(plan["name"]), str(plan["digest"]))
    else:
        child.phase = APPLYING
        child.reason = str(status.get("phase") or "")


# ------------------------------------------------------------------ the controller


class RolloutController:
    """Drives PtahRollouts; the operator registers it beside the two lifecycle families.

    Its only state between passes is a cache of statements digests by plan: a PtahPlan
    is immutable and named by its digest, and each is checked against that digest
    before its statements are trusted, so the cache can only save reads."""

    kind = ROLLOUT
    label = "rollout"
    # Its children's kinds come with the lifecycle families; Secrets select targets.
    watches: tuple[Watch, ...] = (Watch(SECRET),)

    def __init__(self) -> None:
        self._statements: dict[tuple[str, str, str, str], str] = {}

    # -- which events concern a rollout (the operator's mapping asks) --

    def concerns(self, kind: str, obj: Obj, rollouts: Iterable[Obj]) -> set[str]:
        """Names of the rollouts (of ``obj``'s namespace) an event on ``obj`` concerns: a
        child's every change (its status included), an approval naming the rollout, and
        any Secret change where a selector could gain or lose a target."""
        meta = obj.get("metadata") or {}
        if kind in CHILD_KINDS:
            return {
                str(r["name"])
                for r in meta.get("ownerReferences") or []
                if r.get("kind") == ROLLOUT.kind and r.get("name")
            }
        if kind == APPROVAL.kind:
            ref = (obj.get("spec") or {}).get("resourceRef") or {}
            if ref.get("kind") == ROLLOUT.kind and ref.get("name"):
                return {str(ref["name"])}
            return set()
        if kind == SECRET.kind:
            name = str(meta.get("name") or "")
            found = set()
            for r in rollouts:
                targets = (r.get("spec") or {}).get("targets") or {}
                listed = {
                    (s.get("secretRef") or {}).get("name") for s in targets.get("secrets") or []
                }
                if targets.get("selector") is not None or name in listed:
                    found.add(str(r["metadata"]["name"]))
            return found
        return set()

    # -- one pass --

    def reconcile(
        self, env: Env, namespace: str, name: str, report: PassReport | None = None
    ) -> Result:
        report = PassReport() if report is None else report
        cluster = env.cluster
        obj = cluster.get(ROLLOUT, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            # Children are owned: the garbage collector deletes them, and each one's own
            # finalizer holds its deletion while it owes anything.
            return Result(report=report)
        report.saw(obj)
        pass_ = _Pass(env, obj, self._statements, report)
        return replace(pass_.run(), report=report)


@dataclass
class _Pass(ObjectPass):
    env: Env
    obj: Obj
    cache: dict[tuple[str, str, str, str], str]
    report: PassReport

    # ---------------------------------------------------------------- run

    def run(self) -> Result:
        raw = dict(self.obj.get("spec") or {})
        try:
            spec = RolloutSpec.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            self._publish_invalid(f"spec.{where}: {first.get('msg', 'invalid')}")
            return Result()
        view = self._read(spec, raw)
        stop = self._stop(view)
        paused = spec.paused
        current = max(
            (c.wave for c in view.children if c.at_revision and c.wave is not None), default=None
        )
        hold = stop is not None or paused
        if not hold:
            self._approve(view)
            current = self._advance(view, current)
        self._remove(view)
        self._publish(view, current, stop)
        return Result()

    # ---------------------------------------------------------------- read

    def _read(self, spec: RolloutSpec, raw: dict[str, Any]) -> View:
        kind_name, _ = template_body(raw)
        kind = CHILD_KINDS[kind_name]
        targets = resolve_targets(self.cluster, self.namespace, spec)
        revision = revision_of(raw)
        label = {LABEL_ROLLOUT: _label_value(self.name)}
        by_target: dict[str, Obj] = {}
        orphans: list[Obj] = []
        wanted = {t.name for t in targets}
        for k in CHILD_KINDS.values():
            for obj in self.cluster.list(k, self.namespace, label):
                if not _owned_by(obj, self.uid):
                    continue
                target = (obj["metadata"].get("annotations") or {}).get(ANN_TARGET, "")
                if k is kind and target in wanted and target not in by_target:
                    by_target[target] = obj
                else:
                    orphans.append(obj)
        children = []
        for t in targets:
            found = by_target.get(t.name)
            child = Child(t, found)
            if found is not None:
                ann = found["metadata"].get("annotations") or {}
                child.at_revision = ann.get(ANN_REVISION) == revision and _aims_at(found, t)
                if child.at_revision and str(ann.get(ANN_WAVE, "")).isdigit():
                    child.wave = int(ann[ANN_WAVE])
            classify(child)
            children.append(child)
        approvals = self.cluster.list(APPROVAL, self.namespace)
        view = View(spec, raw, revision, children, orphans, approvals)
        self._statements_of(view)
        return view

    def _statements_of(self, view: View) -> None:
        """The statements digest of each waiting child's plan (read uncached once, checked
        against the plan digest the child names), and whether a rollout approval covers it."""
        granted = self._granted(view)
        for c in view.children:
            if c.phase != WAITING or c.plan is None or c.obj is None:
                continue
            uid = str(c.obj["metadata"]["uid"])
            key = (self.namespace, c.plan[0], c.plan[1], uid)
            s = self.cache.get(key)
            if s is None:
                plan = self.cluster.get(PLAN, self.namespace, c.plan[0])
                if plan is None:
                    continue
                try:
                    pspec = PlanSpec.model_validate(plan.get("spec") or {})
                except ValidationError:
                    continue
                if pspec.owner_uid != uid or plan_digest(pspec) != c.plan[1]:
                    continue
                s = statements_digest(pspec.statements)
                if len(self.cache) > 20000:
                    self.cache.clear()
                self.cache[key] = s
            c.statements = s
            c.parked = not self._child_has_approval(view, c) and not any(
                self._unspent(view, a, c) for a in granted.get(s, [])
            )

    # ---------------------------------------------------------------- approvals

    def _granted(self, view: View) -> dict[str, list[Obj]]:
        """Rollout approvals by statements digest."""
        out: dict[str, list[Obj]] = {}
        for a in view.approvals:
            try:
                parsed = PtahApproval.model_validate(a)
            except ValidationError:
                continue
            ref = parsed.spec.resource_ref
            if ref.kind != ROLLOUT.kind or ref.name != self.name or approval_consumed(parsed):
                continue
            out.setdefault(parsed.spec.plan_digest, []).append(a)
        for items in out.values():
            items.sort(key=lambda a: str(a["metadata"]["name"]))
        return out

    def _child_approval_name(self, approval: Obj, child: Child) -> str:
        assert child.obj is not None
        pair = digest([approval["metadata"]["uid"], child.obj["metadata"]["uid"]], 12)
        return f"{label_safe(str(child.obj['metadata']['name']), 48)}-ra-{pair}"

    def _unspent(self, view: View, approval: Obj, child: Child) -> bool:
        """Not yet spent on this target: its approval named after the pair is absent."""
        name = self._child_approval_name(approval, child)
        return all(str(a["metadata"]["name"]) != name for a in view.approvals)

    def _approve(self, view: View) -> None:
        """Spend a rollout approval on each started child waiting on exactly its
        statements, by creating the child's own approval of its own plan digest."""
        granted = self._granted(view)
        for c in view.children:
            if c.phase != WAITING or c.plan is None or c.statements is None or c.obj is None:
                continue
            if c.wave is None:
                continue
            if self._child_has_approval(view, c):
                continue
            for approval in granted.get(c.statements, []):
                if self._unspent(view, approval, c):
                    self._create_child_approval(view, approval, c)
                    c.parked = False
                    break

    def _child_has_approval(self, view: View, c: Child) -> bool:
        assert c.obj is not None and c.plan is not None
        for a in view.approvals:
            spec = a.get("spec") or {}
            ref = spec.get("resourceRef") or {}
            if (
                ref.get("kind") == c.obj["kind"]
                and ref.get("name") == c.obj["metadata"]["name"]
                and spec.get("planDigest") == c.plan[1]
                and not any(
                    x.get("type") == "Consumed" and x.get("status") == "True"
                    for x in (a.get("status") or {}).get("conditions") or []
                )
            ):
                return True
        return False

    def _create_child_approval(self, view: View, approval: Obj, c: Child) -> None:
        assert c.obj is not None and c.plan is not None and c.statements is not None
        meta = c.obj["metadata"]
        by = str((approval.get("spec") or {}).get("approvedBy") or "")
        body = {
            "apiVersion": APPROVAL.api_version,
            "kind": APPROVAL.kind,
            "metadata": {
                "name": self._child_approval_name(approval, c),
                "namespace": self.namespace,
                "labels": {
                    LABEL_ROLLOUT: _label_value(self.name),
                    LABEL_ROLLOUT_APPROVAL: _label_value(str(approval["metadata"]["name"])),
                    "app.kubernetes.io/managed-by": "ptah",
                },
                "ownerReferences": [
                    {
                        "apiVersion": c.obj.get("apiVersion", "ptah.io/v1alpha1"),
                        "kind": c.obj["kind"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                    }
                ],
            },
            "spec": {
                "resourceRef": {"kind": c.obj["kind"], "name": meta["name"]},
                "planDigest": c.plan[1],
                "approvedBy": by,
                "reason": f"rollout {self.name}: statements {c.statements[:12]} approved in "
                f"PtahApproval {approval['metadata']['name']}",
            },
        }

        def create() -> None:
            try:
                self.cluster.create(APPROVAL, body)
            except errors.AlreadyExists:
                return  # spent for this target already

        self.commit("rollout_approve_child", create)
        view.approvals.append(body)

    # ---------------------------------------------------------------- waves

    def _canary_size(self, view: View) -> int:
        s = view.spec.strategy
        total = len(view.children)
        if s.canary_percent is not None:
            return max(1, math.ceil(total * s.canary_percent / 100)) if total else 0
        return s.canary

    def _wave_size(self, view: View, wave: int) -> int:
        canary = self._canary_size(view)
        if wave == 0 and canary > 0:
            return canary
        return view.spec.strategy.max_parallel

    def _done(self, view: View, c: Child) -> bool:
        canary = c.wave == 0 and self._canary_size(view) > 0
        if c.phase == READY:
            return True
        if canary:
            return False
        return (c.phase == WAITING and c.parked) or c.phase == FAILED

    def _advance(self, view: View, current: int | None) -> int | None:
        """Start the next wave once the current one is done; fill a wave a crash left
        part-started. Returns the current wave."""
        unstarted = [c for c in view.children if not c.at_revision or c.wave is None]
        if not unstarted:
            return current
        if current is None:
            wave = 0
            room = self._wave_size(view, 0)
        else:
            members = [c for c in view.children if c.at_revision and c.wave == current]
            if all(self._done(view, c) for c in members):
                wave = current + 1
                room = self._wave_size(view, wave)
            else:
                wave = current
                room = self._wave_size(view, current) - len(members)
        if room <= 0:
            return current
        started = unstarted[:room]
        for c in started:
            self._start(view, c, wave)
        view.notes.append(
            (
                "WaveStarted",
                f"wave {wave}{' (canary)' if wave == 0 and self._canary_size(view) else ''}: "
                f"{len(started)} target(s): "
                + ", ".join(c.target.name for c in started[:20])
                + (" ..." if len(started) > 20 else ""),
                False,
            )
        )
        return wave

    def _start(self, view: View, c: Child, wave: int) -> None:
        """Write the child at this revision and wave: created, or its spec replaced."""
        kind_name, _ = template_body(view.raw)
        kind = CHILD_KINDS[kind_name]
        spec = desired_spec(view.raw, c.target)
        annotations = {ANN_TARGET: c.target.name, ANN_REVISION: view.revision, ANN_WAVE: str(wave)}
        labels = {
            k: v
            for k, v in (self.obj["metadata"].get("labels") or {}).items()
            if not k.startswith("ptah.io/")
        }
        labels[LABEL_ROLLOUT] = _label_value(self.name)
        name = child_name(self.name, c.target)
        if c.obj is None:
            body = {
                "apiVersion": kind.api_version,
                "kind": kind.kind,
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [
                        {
                            "apiVersion": ROLLOUT.api_version,
                            "kind": ROLLOUT.kind,
                            "name": self.name,
                            "uid": self.uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": spec,
            }

            def create() -> Obj:
                try:
                    return self.cluster.create(kind, body)
                except errors.AlreadyExists:
                    # Someone else's resource under the name: never adopt it.
                    existing = self.cluster.get(kind, self.namespace, name)
                    if existing is None or not _owned_by(existing, self.uid):
                        raise
                    return existing

            c.obj = self.commit("rollout_start_child", create)
        else:
            meta = c.obj["metadata"]
            patch = {
                "metadata": {
                    "resourceVersion": meta["resourceVersion"],
                    "annotations": annotations,
                    "labels": labels,
                },
                "spec": merge_diff(c.obj.get("spec") or {}, spec),
            }
            c.obj = self.commit(
                "rollout_start_child",
                lambda: self.cluster.patch(kind, self.namespace, str(meta["name"]), patch),
            )
        c.at_revision, c.wave = True, wave
        classify(c)

    # ---------------------------------------------------------------- stop

    def _stop(self, view: View) -> RolloutStop | None:
        """Why nothing new may start: the first target (in order) that stops the rollout."""
        s = view.spec.strategy
        canary = self._canary_size(view)
        failed = [c for c in view.children if c.phase == FAILED]
        for c in view.children:
            if c.phase == UNCERTAIN and s.stop_on_uncertain:
                return self._stop_for(c, "an uncertain outcome")
            if c.phase == FAILED and c.wave == 0 and canary > 0:
                return self._stop_for(c, "a failed canary")
        if len(failed) > s.max_failures:
            return self._stop_for(
                failed[s.max_failures],
                f"{len(failed)} failed targets (maxFailures {s.max_failures})",
            )
        return None

    def _stop_for(self, c: Child, why: str) -> RolloutStop:
        name = str(c.obj["metadata"]["name"]) if c.obj is not None else ""
        return RolloutStop(
            target=c.target.name,
            child=name,
            reason=c.reason or c.phase,
            message=f"stopped on {why}: {c.target.name} ({name}) {c.phase}: "
            f"{c.reason}{': ' + c.message if c.message else ''}"[:1000],
        )

    # ---------------------------------------------------------------- removal

    def _remove(self, view: View) -> None:
        """A removed target's child is deleted once it owes nothing; its own finalizer
        holds the deletion further while the lifecycle owes anything."""
        for obj in view.orphans:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp") or not owes_nothing(obj):
                continue
            kind = CHILD_KINDS[str(obj["kind"])]

            def delete(kind: Kind = kind, meta: dict[str, Any] = meta) -> None:
                try:
                    self.cluster.delete(
                        kind, self.namespace, str(meta["name"]), uid=str(meta["uid"])
                    )
                except (errors.NotFound, errors.Conflict):
                    return

            self.commit("rollout_delete_child", delete)
            view.notes.append(
                (
                    "TargetRemoved",
                    f"{meta.get('annotations', {}).get(ANN_TARGET, meta['name'])}: "
                    f"child {meta['name']} deleted",
                    False,
                )
            )

    # ---------------------------------------------------------------- publish

    def _publish_invalid(self, message: str) -> None:
        fields = {
            "observedGeneration": self.generation,
            "phase": "Blocked",
            "conditions": self._conditions(False, False, True, "InvalidSpec", message),
        }
        self._write(fields)

    def _conditions(
        self,
        ready: bool,
        reconciling: bool,
        stalled: bool,
        reason: str,
        message: str,
        applied: str | None = None,
    ) -> list[dict[str, Any]]:
        previous = {
            c.get("type"): c for c in (self.obj.get("status") or {}).get("conditions") or []
        }
        now = rfc3339(self.cluster.now())

        def cond(type_: str, on: bool, why: str, text: str) -> dict[str, Any]:
            status = "True" if on else "False"
            old = previous.get(type_) or {}
            return {
                "type": type_,
                "status": status,
                "reason": why,
                "message": text,
                "observedGeneration": self.generation,
                "lastTransitionTime": old.get("lastTransitionTime")
                if old.get("status") == status
                else now,
            }

        return [
            cond("Ready", ready, reason, "every target is Ready" if ready else message),
            cond("Reconciling", reconciling, reason, message if reconciling else ""),
            cond("Stalled", stalled, reason, message if stalled else ""),
            cond(
                "SourceApplied",
                applied is not None,
                "SourceApplied" if applied is not None else reason,
                f"source {applied}" if applied is not None else "not every target has it yet",
            ),
        ]

    def _publish(self, view: View, current: int | None, stop: RolloutStop | None) -> None:
        counts = RolloutCounts(total=len(view.children))
        field_of = {
            READY: "ready",
            APPLYING: "applying",
            WAITING: "waiting_for_approval",
            UNCERTAIN: "uncertain",
            FAILED: "failed",
            PENDING: "pending",
        }
        for c in view.children:
            name = field_of[c.phase]
            setattr(counts, name, getattr(counts, name) + 1)
        decisions: dict[str, RolloutDecision] = {}
        for c in view.children:
            if c.phase == WAITING and c.parked and c.statements and c.obj is not None:
                d = decisions.get(c.statements)
                if d is None:
                    d = RolloutDecision(
                        statements_digest=c.statements,
                        statements=int(
                            ((c.obj.get("status") or {}).get("currentPlan") or {}).get("statements")
                            or 0
                        ),
                        destructive=bool(
                            ((c.obj.get("status") or {}).get("currentPlan") or {}).get(
                                "destructive"
                            )
                        ),
                        targets=0,
                        example=str(c.obj["metadata"]["name"]),
                    )
                    decisions[c.statements] = d
                d.targets += 1
        waves_left = 0
        unstarted = sum(1 for c in view.children if not c.at_revision or c.wave is None)
        if unstarted:
            waves_left = math.ceil(unstarted / view.spec.strategy.max_parallel)
        total_waves = (current + 1 if current is not None else 0) + waves_left
        complete = counts.total > 0 and counts.ready == counts.total
        applied = self._applied_source(view) if complete else None
        if stop is not None:
            phase, reason, message = "Stopped", "Stopped", stop.message
        elif view.spec.paused:
            phase, reason, message = "Paused", "Paused", "spec.paused is true"
        elif complete:
            phase, reason, message = "Ready", "Ready", f"{counts.total} targets Ready"
        elif counts.total == 0:
            phase, reason, message = "NoTargets", "NoTargets", "no Secret matches the targets"
        elif decisions and counts.applying == 0:
            phase, reason = "WaitingForApproval", "WaitingForApproval"
            message = (
                f"{sum(d.targets for d in decisions.values())} target(s) wait for a decision: "
                f"ptah approve rollout/{self.name} -n {self.namespace}"
            )
        else:
            phase, reason = "Progressing", "Progressing"
            message = f"wave {current}: {counts.ready}/{counts.total} Ready"
        previous = RolloutStatus.model_validate(self.obj.get("status") or {})
        conditions = self._conditions(
            complete and stop is None,
            stop is None and not view.spec.paused and not complete and counts.total > 0,
            stop is not None,
            reason,
            message,
            applied,
        )
        targets = [
            RolloutTargetStatus(
                name=c.target.name,
                child=child_name(self.name, c.target)
                if c.obj is None
                else str(c.obj["metadata"]["name"]),
                wave=c.wave if c.wave is not None else -1,
                phase=c.phase,
                revision=c.at_revision,
                reason=c.reason,
            )
            for c in view.children
        ]
        kind_name, _ = template_body(view.raw)
        fields: dict[str, Any] = {
            "observedGeneration": self.generation,
            "phase": phase,
            "conditions": conditions,
            "revision": view.revision,
            "childKind": kind_name,
            "currentWave": current,
            "waves": total_waves,
            "counts": counts.replacing(),
            "stopped": stop.replacing() if stop is not None else None,
            "decisions": [d.replacing() for d in decisions.values()],
            "targets": [t.replacing() for t in targets],
        }
        if applied is not None:
            fields["appliedSource"] = applied
        if stop is not None and previous.stopped != stop:
            view.notes.append(("RolloutStopped", stop.message, True))
        if complete and previous.phase != "Ready":
            view.notes.append(("RolloutReady", message, False))
        if view.spec.paused and previous.phase != "Paused":
            view.notes.append(("RolloutPaused", message, False))
        self._write(fields)
        for reason_, text, warning in view.notes:
            self.env.events(
                self.cluster,
                self.obj,
                reason_,
                text,
                warning=warning,
                component=self.env.controller,
            )

    def _applied_source(self, view: View) -> str | None:
        """The one source every target reached, when they all agree."""
        seen = {
            (c.obj.get("status") or {}).get("appliedSource") if c.obj is not None else None
            for c in view.children
        }
        if len(seen) == 1:
            only = next(iter(seen))
            return str(only) if only else None
        return None

    def _write(self, fields: dict[str, Any]) -> None:
        current = self.obj.get("status") or {}

        def strip(cs: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in cs]

        changed = any(
            (strip(current.get(k) or []) != strip(v)) if k == "conditions" else current.get(k) != v
            for k, v in fields.items()
        )
        if not changed:
            return
        patch = {
            "metadata": {"resourceVersion": self.obj["metadata"]["resourceVersion"]},
            "status": fields,
        }
        self.obj = self.commit(
            "rollout_write_status",
            lambda: self.cluster.patch(ROLLOUT, self.namespace, self.name, patch, "status"),
        )
        self.report.saw(self.obj)
