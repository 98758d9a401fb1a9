-- The hold-out workload for Debian's lua5.4 (test_aarch64_holdout.py):
-- endless computation at the bottom of a deep stack whose levels cross
-- between Lua and C in every way the interpreter has (pcall, a metamethod,
-- table.sort's comparator, string.gsub's callback, a coroutine, xpcall's
-- message handler is not reached). The test sends signals at varied
-- moments; the program never ends by itself.
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function work()
  local t = {}
  for i = 1, 300 do t[i] = (i * 7919) % 1009 end
  table.sort(t, function(a, b) return a < b end)
  local s = string.rep("lorem ipsum dolor ", 40)
  s = s:gsub("%w+", function(w) return w:upper() end)
  local parts = {}
  for w in s:gmatch("%u+") do parts[#parts + 1] = w:lower() end
  collectgarbage("step")
  return fib(14) + #table.concat(parts, ",") + t[1]
end

local nest
local via = {
  function(d) local ok, v = pcall(nest, d - 1); return v end,
  function(d)
    local p = setmetatable({}, {__index = function(_, k) return nest(k) end})
    return p[d - 1]
  end,
  function(d)
    local r, t = 0, {2, 1}
    table.sort(t, function(a, b) if r == 0 then r = nest(d - 1) end return a < b end)
    return r
  end,
  function(d)
    local r = 0
    string.gsub("x", "x", function() r = nest(d - 1) end)
    return r
  end,
  function(d) return coroutine.wrap(function() return nest(d - 1) end)() end,
}

nest = function(d)
  if d == 0 then return work() end
  return via[d % #via + 1](d)
end

local depth = tonumber(arg and arg[1]) or 20
local sum = 0
while true do sum = (sum + nest(depth)) % 1000003 end
