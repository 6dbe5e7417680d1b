-- Argo CD health of a kubeskills.io Skill, Agent, CommandPolicy or
-- SkillRepository, read from the kstatus conditions the operator writes:
-- Ready, and the abnormal-true Reconciling and Stalled.
--
--   Progressing  Reconciling is True, or the operator has not yet observed
--                the latest generation (status.observedGeneration), or
--                there is no Ready condition yet.
--   Degraded     Stalled is True, or Ready is False with reason
--                ValidationFailed (the object must change before it can
--                be served) or SkillsFailed (skill folders of a
--                SkillRepository's revision are not served as committed
--                until a new revision).
--   Healthy      Ready is True for the latest generation.
local hs = {}

local function findCondition(conditions, conditionType)
  for _, condition in ipairs(conditions) do
    if condition.type == conditionType then
      return condition
    end
  end
  return nil
end

local function isTrue(condition)
  return condition ~= nil and condition.status == "True"
end

local status = obj.status or {}
local conditions = status.conditions or {}
local generation = obj.metadata.generation
-- A generation is at least 1; a lower observedGeneration means none yet.
local observed = status.observedGeneration
if observed ~= nil and observed < 1 then
  observed = nil
end
local ready = findCondition(conditions, "Ready")
local reconciling = findCondition(conditions, "Reconciling")
local stalled = findCondition(conditions, "Stalled")

if isTrue(reconciling) then
  hs.status = "Progressing"
  hs.message = reconciling.message
  return hs
end

if generation ~= nil and observed ~= generation then
  hs.status = "Progressing"
  if observed == nil then
    hs.message = "Waiting for the operator to observe generation " .. generation
  else
    hs.message = "Waiting for the operator to observe generation " .. generation ..
      "; it last observed generation " .. observed
  end
  return hs
end

if isTrue(stalled) then
  hs.status = "Degraded"
  hs.message = stalled.message
  return hs
end

if ready ~= nil and ready.status == "False" and (ready.reason == "ValidationFailed" or ready.reason == "SkillsFailed") then
  hs.status = "Degraded"
  hs.message = ready.message
  return hs
end

if isTrue(ready) then
  hs.status = "Healthy"
  hs.message = ready.message
  return hs
end

hs.status = "Progressing"
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  hs.message = ready.message
else
  hs.message = "Waiting for the Ready condition"
end
return hs
