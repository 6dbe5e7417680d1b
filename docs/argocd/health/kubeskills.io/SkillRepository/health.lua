-- Argo CD health of a kubeskills.io SkillRepository, read from the kstatus
-- conditions the operator writes: Ready, and the abnormal-true Reconciling
-- and Stalled. It is the check of Skill, Agent and CommandPolicy, with the
-- SkillRepository's reason for a commit that must change.
--
--   Progressing  Reconciling is True: the source is missing or has no
--                artifact yet (SourceNotReady), or the artifact cannot be
--                fetched or verified (ArtifactFailed), and the operator
--                retries; or the operator has not yet observed the latest
--                generation (status.observedGeneration); or there is no
--                Ready condition yet.
--   Degraded     Stalled is True, or Ready is False with reason
--                SkillsFailed: some skill folders of the revision are not
--                served as committed (status.problems), and stay so until
--                a new revision or a change to the SkillRepository.
--   Healthy      Ready is True for the latest generation: every skill
--                folder of status.revision is applied.
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

if ready ~= nil and ready.status == "False" and ready.reason == "SkillsFailed" then
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
