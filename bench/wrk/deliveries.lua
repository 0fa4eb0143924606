-- wrk script: cycles through the pre-signed deliveries written by
-- bench/cmd/presign (format in bench/internal/reqfile/reqfile.go), in its
-- plain form ("KEY SIGNATURE" lines, body prefix .. KEY .. suffix) or its
-- object form (a body-middle line, "KEY SIGNATURE OBJECT" lines, body
-- prefix .. KEY .. middle .. OBJECT .. suffix).
--
--   wrk -t2 -c64 -d8s -s bench/wrk/deliveries.lua http://127.0.0.1:PORT -- FILE MODE THREADS [LAGMIN LAGMAX]
--
-- MODE
--   unique  every request a new key: thread t of THREADS sends deliveries
--           t, t+THREADS, t+2*THREADS, ... so no two threads share a key.
--           Running past the end of its share wraps around (the rest would
--           be duplicates): counted as "wrapped" in the result line.
--   dup     every request delivery 0 (one key, one body): after the first,
--           all are duplicates the gateway replays.
--   mix     every 5th request (20 %) repeats a key this same thread sent
--           LAGMIN..LAGMAX requests earlier (finished by then, and inside
--           the gateway's 10 s window at any rate this harness sees); the
--           other 80 % are new keys as in unique.
--
-- done() prints one line the harness parses:
--   BENCH requests=N duration_us=N rps=F p50_us=N p99_us=N ... wrapped=N
-- wrk itself counts responses with status >= 400 (summary.errors.status).

local threads = {}
local nthreads_seen = 0

function setup(thread)
  thread:set("tid", nthreads_seen)
  nthreads_seen = nthreads_seen + 1
  table.insert(threads, thread)
end

local method, path, key_header, sig_header, body_prefix, body_middle, body_suffix
local hdr = {}
local keys, sigs, objs = {}, {}, {}
local n = 0
local mode, lagmin, lagmax
sent, uniq, dups, wrapped = 0, 0, 0, 0

-- split cuts a "KEY SIGNATURE" line (plain find: string.match is not
-- compiled by LuaJIT and would make loading 600k lines take seconds).
local function split(line)
  local sp = line:find(" ", 1, true)
  if not sp then error("deliveries.lua: bad delivery line " .. line) end
  return line:sub(1, sp - 1), line:sub(sp + 1)
end

-- split3 cuts a "KEY SIGNATURE OBJECT" line of the object form: the key
-- before the first space, the object after the last.
local function split3(line)
  local sp = line:find(" ", 1, true)
  if not sp then error("deliveries.lua: bad delivery line " .. line) end
  local last = sp
  while true do
    local nxt = line:find(" ", last + 1, true)
    if not nxt then break end
    last = nxt
  end
  if last == sp or last == #line then error("deliveries.lua: delivery line without an object id: " .. line) end
  return line:sub(1, sp - 1), line:sub(sp + 1, last - 1), line:sub(last + 1)
end

-- read_line stores a delivery line as delivery j.
local function read_line(j, line)
  if body_middle then
    keys[j], sigs[j], objs[j] = split3(line)
  else
    keys[j], sigs[j] = split(line)
  end
end

function init(args)
  local file = args[1]
  mode = args[2] or "unique"
  local nthreads = tonumber(args[3] or "1")
  lagmin = tonumber(args[4] or "1000")
  lagmax = tonumber(args[5] or "5000")
  if mode ~= "unique" and mode ~= "dup" and mode ~= "mix" then
    error("deliveries.lua: unknown mode " .. tostring(mode))
  end
  local fh = assert(io.open(file, "r"))
  local first = fh:read("*l")
  if first ~= "clawgate-bench-requests 1" then
    error("deliveries.lua: " .. file .. " is not a request file")
  end
  while true do
    local line = fh:read("*l")
    if not line then error("deliveries.lua: no count line in " .. file) end
    local name, val = line:match("^(%S+) (.*)$")
    if name == "method" then method = val
    elseif name == "path" then path = val
    elseif name == "header" then
      local k, v = val:match("^(.-): (.*)$")
      hdr[k] = v
    elseif name == "key-header" then key_header = val
    elseif name == "sig-header" then sig_header = val
    elseif name == "body-prefix" then body_prefix = val
    elseif name == "body-middle" then body_middle = val
    elseif name == "body-suffix" then body_suffix = val
    elseif name == "count" then break
    else error("deliveries.lua: unknown line " .. line) end
  end
  local i = 0
  for line in fh:lines() do
    if mode == "dup" then
      if i == 0 then
        read_line(1, line)
        break
      end
    elseif i % nthreads == tid then
      n = n + 1
      read_line(n, line)
    end
    i = i + 1
  end
  fh:close()
  if mode == "dup" then n = 1 end
  if n == 0 then error("deliveries.lua: no deliveries for thread " .. tid) end
  math.randomseed(1000 + tid)
end

function request()
  sent = sent + 1
  local j
  if mode == "dup" then
    j = 1
  elseif mode == "mix" and sent % 5 == 0 and uniq >= lagmin + 2 then
    -- Never j = 1: wrk calls request() once in thread 0 to check the
    -- script and never sends that request, so thread 0's first key was not
    -- delivered; a "duplicate" of it would be a first delivery, and two
    -- of those in flight at once a 409.
    local lag = math.random(lagmin, math.min(lagmax, uniq - 2))
    j = uniq - lag
    if j > n then j = (j - 1) % n + 1 end
    dups = dups + 1
  else
    uniq = uniq + 1
    j = uniq
    if j > n then
      wrapped = wrapped + 1
      j = (j - 1) % n + 1
    end
  end
  local k = keys[j]
  hdr[key_header] = k
  hdr[sig_header] = sigs[j]
  if body_middle then
    return wrk.format(method, path, hdr, body_prefix .. k .. body_middle .. objs[j] .. body_suffix)
  end
  return wrk.format(method, path, hdr, body_prefix .. k .. body_suffix)
end

function done(summary, latency, requests)
  local t_sent, t_dups, t_wrapped, t_share = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    t_sent = t_sent + (t:get("sent") or 0)
    t_dups = t_dups + (t:get("dups") or 0)
    t_wrapped = t_wrapped + (t:get("wrapped") or 0)
  end
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    "BENCH requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d mean_us=%.0f " ..
    "status_err=%d connect_err=%d read_err=%d write_err=%d timeout_err=%d sent=%d dups=%d wrapped=%d\n",
    summary.requests, summary.duration, summary.requests / secs,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    e.status, e.connect, e.read, e.write, e.timeout, t_sent, t_dups, t_wrapped))
end
