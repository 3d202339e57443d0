-- toolgate's fixed-window count, run atomically by Redis.
-- KEYS: once-only markers (may be empty). ARGV: counter key, amount, policy ("within" adds only
-- if every window stays within its limit, "always" adds regardless), marker TTL in ms, the number
-- of windows, then each window's length in ms and limit.
-- With markers, the amount is the number of markers not seen before (each marked for the TTL).
-- Returns {added, used_1, resets_in_ms_1, used_2, resets_in_ms_2, ...}.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key = ARGV[1]
local amount = tonumber(ARGV[2])
local policy = ARGV[3]
local marker_ttl = tonumber(ARGV[4])
local count = tonumber(ARGV[5])

if #KEYS > 0 then
  amount = 0
  for i = 1, #KEYS do
    if redis.call('SET', KEYS[i], '1', 'NX', 'PX', marker_ttl) then
      amount = amount + 1
    end
  end
end

local keys, used, resets = {}, {}, {}
local fits = true
for i = 1, count do
  local length = tonumber(ARGV[4 + 2 * i])
  local limit = tonumber(ARGV[5 + 2 * i])
  local period = math.floor(now / length)
  keys[i] = key .. ':' .. length .. ':' .. period
  used[i] = tonumber(redis.call('GET', keys[i]) or '0')
  resets[i] = (period + 1) * length - now
  if used[i] + amount > limit then
    fits = false
  end
end

local added = 0
if amount > 0 and (fits or policy == 'always') then
  added = amount
  for i = 1, count do
    used[i] = redis.call('INCRBY', keys[i], amount)
    redis.call('PEXPIRE', keys[i], resets[i] + 1000)
  end
end

local reply = {added}
for i = 1, count do
  reply[#reply + 1] = used[i]
  reply[#reply + 1] = resets[i]
end
return reply
