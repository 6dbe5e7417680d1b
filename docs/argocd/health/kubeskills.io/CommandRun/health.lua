-- Argo CD health of a kubeskills.io CommandRun, read from its phase and its
-- Succeeded condition.
--
--   Healthy      the command succeeded.
--   Degraded     the run ended any other way: Failed, TimedOut, Denied or
--                Expired. An ended run never changes again.
--   Suspended    the policy said Ask and the run waits for a person to
--                approve or deny it.
--   Progressing  anything else: not yet judged, approved but not yet
--                started, or running.
local hs = {}

local function findCondition(conditions, conditionType)
  for _, condition in ipairs(conditions) do
    if condition.type == conditionType then
      return condition
    end
  end
  return nil
end

local ended = {Failed = true, TimedOut = true, Denied = true, Expired = true}

local status = obj.status or {}
local phase = status.phase
local generation = obj.metadata.generation
local succeeded = findCondition(status.conditions or {}, "Succeeded")
local message = nil
if succeeded ~= nil and succeeded.message ~= nil and succeeded.message ~= "" then
  message = succeeded.message
end

if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = message or "The command succeeded"
  return hs
end

if phase ~= nil and ended[phase] then
  hs.status = "Degraded"
  hs.message = message or ("The run ended " .. phase)
  return hs
end

if generation ~= nil and status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

if phase == "AwaitingApproval" then
  hs.status = "Suspended"
  hs.message = message or "Waiting for a person to approve or deny the command"
  return hs
end

hs.status = "Progressing"
hs.message = message or "Waiting for the command to start"
return hs
