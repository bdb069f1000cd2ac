-- Argo CD health check for PtahSchema, PtahMigration and PtahRollout (one script serves
-- all three). Argo CD runs it with gopher-lua (Lua 5.1); tests/unit/test_argocd_health.py
-- runs it under Lua 5.1 against sample objects.
--   Suspended    spec.suspend or spec.paused, or a plan waiting for a person's approval
--                (`ptah approve`)
--   Degraded     Stalled=True (a person must act: see the message and docs/operations.md;
--                for a rollout, the message names the target that stopped it)
--   Healthy      Ready=True for the current generation (a rollout: every target Ready)
--   Progressing  anything else (reading, planning, applying, proving)
local hs = {}
local status = obj.status or {}
local generation = (obj.metadata or {}).generation

local function condition(kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function current(c)
  return c.observedGeneration == nil or generation == nil or c.observedGeneration >= generation
end

if obj.spec ~= nil and (obj.spec.suspend == true or obj.spec.paused == true) then
  hs.status = "Suspended"
  if obj.spec.paused == true then
    hs.message = "spec.paused is true"
  else
    hs.message = "spec.suspend is true"
  end
  if status.waitingFor ~= nil then
    hs.message = hs.message .. "; waiting for " .. status.waitingFor
  end
  return hs
end

local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "Stalled") .. ": " .. (stalled.message or "")
  return hs
end

if status.phase == "WaitingForApproval" then
  hs.status = "Suspended"
  hs.message = "waiting for " .. (status.waitingFor or "approval") .. ": ptah approve "
  if obj.kind == "PtahMigration" then
    hs.message = hs.message .. "migration/"
  elseif obj.kind == "PtahRollout" then
    hs.message = hs.message .. "rollout/"
  else
    hs.message = hs.message .. "schema/"
  end
  hs.message = hs.message .. obj.metadata.name .. " -n " .. (obj.metadata.namespace or "default")
  return hs
end

local ready = condition("Ready")
local observed = status.observedGeneration
local fresh = observed == nil or generation == nil or observed >= generation
if ready ~= nil and ready.status == "True" and current(ready) and fresh then
  hs.status = "Healthy"
  hs.message = ready.message or "up to date"
  return hs
end

hs.status = "Progressing"
if status.waitingFor ~= nil then
  hs.message = (status.phase or "Pending") .. ": waiting for " .. status.waitingFor
elseif ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  hs.message = (status.phase or "Pending") .. ": " .. ready.message
else
  hs.message = "waiting for the Ptah operator to observe this generation"
end
return hs
