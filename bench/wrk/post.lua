-- wrk script: POSTs JSON requests from a generated list (bench/wrk/requests.py), each
-- thread rotating through the list from its own offset.
--   wrk ... -s bench/wrk/post.lua URL -- LIST.lua
-- LIST.lua returns { {path = "/v1/search", key = "KEY", body = "{...}"}, ... }.

local counter = 0

function setup(thread)
  thread:set("offset", counter * 7)
  counter = counter + 1
end

local raw = {}
local i = 0

function init(args)
  local list = dofile(args[1])
  for j, r in ipairs(list) do
    raw[j] = wrk.format("POST", r.path, {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer " .. r.key,
    }, r.body)
  end
  i = tonumber(offset) or 0
end

function request()
  i = i + 1
  return raw[(i % #raw) + 1]
end
