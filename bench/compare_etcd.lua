-- wrk script for bench/compare: PUT or range requests against etcd's JSON
-- gRPC gateway (/v3/kv/put, /v3/kv/range), random keys over a keyspace
-- named as redis-benchmark names them ("key:%012d"), 256-byte values, keys
-- and values base64-encoded as the gateway wants them.
--
--   wrk -t T -c C -d D -s bench/compare_etcd.lua URL -- put|range KEYSPACE VALUE_BYTES PIPELINE
--
-- PIPELINE > 1 sends that many requests back to back on a connection
-- (HTTP/1.1 pipelining; etcd's Go server answers them in order). done()
-- prints one line: "RESULT requests=N duration_us=N errors=N p50_us=N
-- p99_us=N", errors being connect, read, write, timeout and non-2xx
-- statuses together (bench/compare refuses a run with any).

local op, keyspace, value_bytes, pipeline = "put", 100000, 256, 1

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
	local out = {}
	for i = 1, #s, 3 do
		local a, b, c = s:byte(i, i + 2)
		local n = a * 65536 + (b or 0) * 256 + (c or 0)
		local c1 = math.floor(n / 262144) % 64
		local c2 = math.floor(n / 4096) % 64
		local c3 = math.floor(n / 64) % 64
		local c4 = n % 64
		out[#out + 1] = b64chars:sub(c1 + 1, c1 + 1) .. b64chars:sub(c2 + 1, c2 + 1) ..
			(b and b64chars:sub(c3 + 1, c3 + 1) or "=") .. (c and b64chars:sub(c4 + 1, c4 + 1) or "=")
	end
	return table.concat(out)
end

local value64
local headers = { ["Content-Type"] = "application/json" }

function setup(thread)
	thread:set("thread_seed", math.random(1, 2147483647))
end

function init(args)
	op = args[1] or op
	keyspace = tonumber(args[2]) or keyspace
	value_bytes = tonumber(args[3]) or value_bytes
	pipeline = tonumber(args[4]) or pipeline
	math.randomseed(thread_seed or os.time())
	value64 = base64(string.rep("x", value_bytes))
end

local function one()
	local key64 = base64(string.format("key:%012d", math.random(0, keyspace - 1)))
	if op == "put" then
		return wrk.format("POST", "/v3/kv/put", headers,
			'{"key":"' .. key64 .. '","value":"' .. value64 .. '"}')
	end
	return wrk.format("POST", "/v3/kv/range", headers, '{"key":"' .. key64 .. '"}')
end

function request()
	if pipeline <= 1 then
		return one()
	end
	local r = {}
	for i = 1, pipeline do
		r[i] = one()
	end
	return table.concat(r)
end

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("RESULT requests=%d duration_us=%d errors=%d p50_us=%d p99_us=%d\n",
		summary.requests, summary.duration,
		e.connect + e.read + e.write + e.status + e.timeout,
		latency:percentile(50), latency:percentile(99)))
end
