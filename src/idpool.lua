#!lua name=idpool
--
-- idpool Redis Function library, loaded by idpoold at start with
-- FUNCTION LOAD REPLACE. All keys of one application share one hash tag
-- ({entity_key}), so every function here is Redis Cluster safe.
--
-- IDs and offsets are passed and stored as decimal strings and only ever
-- compared as strings: Lua numbers are doubles, exact only below 2^53.

-- The library's version: idpoold loads this library only when the one in
-- Redis is missing or older (never a newer one), so that a rolling upgrade
-- or a rollback of the daemon does not swap the fence under a running one.
-- Bump it with every change of this file. (meson.build reads this line.)
local LIB_VERSION = 7

-- The epoch under which the pools of this Redis process are served:
-- "run_id:master_replid:nonce", chosen by the first idpool_validate after the
-- library's state began (a load, a restart, a restore into the running
-- process, a full resync, a promotion). It lives as long as the loaded
-- library, in this process only (it is never replicated): a replica has
-- none, so a promoted replica serves nothing until a daemon validates it;
-- and since the nonce is new, every meta written before (by this process
-- before a reload, or by another primary) never matches again.
-- idpool_take serves a pool only when its meta was written under this epoch.
-- Only idpool_validate sets it; no status or read-only call does.
local validated = nil
local validated_base = nil -- run_id:master_replid when `validated` was chosen

-- Alerts: the state of each alert kind of an application lives in its meta
-- hash (field alert:<kind> = "firing", absent when resolved), so that any
-- number of daemons and clients agree on it and a transition is published
-- to <prefix>:alerts exactly once.

-- "2026-11-22T06:34:13.123Z" from Redis TIME (Lua here has no os.date).
local function iso8601(t)
    local secs = tonumber(t[1])
    local days = math.floor(secs / 86400)
    local rem = secs - days * 86400
    -- civil_from_days (H. Hinnant), for days since 1970-01-01
    local z = days + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) -
                            math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    local y = yoe + era * 400 + (m <= 2 and 1 or 0)
    return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d,
                         math.floor(rem / 3600), math.floor(rem % 3600 / 60), rem % 60,
                         math.floor(tonumber(t[2]) / 1000))
end

-- prefix and entity key from "<prefix>:{<key>}:meta" (or :pool)
local function app_of(key)
    return string.match(key, '^(.*):{([^}]*)}:%a+$')
end

-- Publish one alert event on <prefix>:alerts.
-- The keys of one application from the keys a call declares. Each function
-- that reads or writes the pool also takes a short form that declares only a
-- key that exists while the application is served (its meta, or the lock of
-- a refill): Redis deletes a list that LPOP empties, and on a Cluster slot
-- being migrated a call whose declared keys are partly absent answers
-- TRYAGAIN until the migration ends. The pool is then reached undeclared
-- (same hash tag, same slot) through pooled(), which returns nil, err when
-- this node does not hold it (the slot's absent keys live on the target).
-- The long forms (pool and meta, or pool, meta and lock) stay for callers of
-- earlier versions. Returns pool, meta, lock, or nil and an error text.
local function app_keys(keys, name, anchor)
    if #keys == 1 then
        local k = keys[1]
        if #k < 6 or string.sub(k, -5) ~= ':' .. anchor then
            return nil, 'IDPOOL_BADARG ' .. name .. ' with one key takes the ' .. anchor ..
                       ' key (<prefix>:{app}:' .. anchor .. '), got ' .. k
        end
        local base = string.sub(k, 1, -6)
        return base .. ':pool', base .. ':meta', base .. ':lock'
    end
    return keys[1], keys[2], keys[3]
end

-- A command on the pool that a Cluster node may not hold (see app_keys):
-- its reply, or nil and the error. Elsewhere redis.pcall never fails here.
local function pooled(...)
    local r = redis.pcall(...)
    if type(r) == 'table' and r.err then
        return nil, r.err
    end
    return r
end

local EPOCH_RETRY_MS = 200 -- IDPOOL_EPOCH and IDPOOL_MOVING: when to retry
local MOVING = 'IDPOOL_MOVING the pool is not on this node: its Cluster slot is being migrated; retry in '

local function publish(meta, kind, state, message, extra)
    local prefix, app = app_of(meta)
    local event = {alert = kind, app = app, state = state, message = message,
                   at = iso8601(redis.call('TIME'))}
    for k, v in pairs(extra or {}) do
        event[k] = v
    end
    redis.call('PUBLISH', prefix .. ':alerts', cjson.encode(event))
end

-- Fire alert `kind` of the application whose meta is `meta`, publishing the
-- event only if it was not already firing. The state field stays after a
-- resolution ("resolved"), so that a second instance resolving the same
-- alert can tell it was already announced. Returns 1 when it fired now.
local function alert_fire(meta, kind, message, extra)
    local field = 'alert:' .. kind
    if redis.call('HGET', meta, field) == 'firing' then
        return 0
    end
    redis.call('HSET', meta, field, 'firing')
    publish(meta, kind, 'firing', message, extra)
    return 1
end

-- A caller whose epoch is not the validated one (the library was reloaded,
-- or the data restored into this process, since it validated) must validate
-- again before it writes anything: nil when it may go on, else the error.
local function current(epoch)
    if not validated or epoch ~= validated then
        return redis.error_reply('IDPOOL_UNVALIDATED epoch ' .. tostring(epoch) ..
                                 ' is not the validated one (' .. tostring(validated) ..
                                 '): call idpool_validate again')
    end
    return nil
end

-- Discard an application's pool and meta, keeping its limits: they are the
-- row's, not the pool's. Until a refill writes meta anew, takes get
-- IDPOOL_EPOCH (retry) and not IDPOOL_NOAPP, which clients take for "not
-- served here" and stop asking. The alert states (alert:<kind> and its
-- :notified claim) stay too: they are the application's, and an alert
-- firing before a restart is not announced again after it.
local function discard(pool, meta)
    local m = redis.call('HGETALL', meta)
    local keep = {}
    for i = 1, #m, 2 do
        local f = m[i]
        if f == 'per_take' or f == 'per_second' or string.sub(f, 1, 6) == 'alert:' then
            keep[#keep + 1] = f
            keep[#keep + 1] = m[i + 1]
        end
    end
    pooled('DEL', pool)
    redis.call('DEL', meta)
    if #keep > 0 then
        redis.call('HSET', meta, unpack(keep))
    end
end

-- The checks of the fence; nil when the caller may push, else the error.
local function fence(pool, meta, lock, token, epoch, expected)
    if redis.call('GET', lock) ~= token then
        return redis.error_reply('IDPOOL_FENCED lock not held by this refiller')
    end
    local err = current(epoch)
    if err then
        return err
    end
    local cur = redis.call('HMGET', meta, 'next', 'epoch')
    if cur[1] and cur[2] ~= epoch then
        discard(pool, meta)
        return redis.error_reply('IDPOOL_EPOCH pool written under another epoch; pool discarded')
    end
    if (cur[1] or '') ~= expected then
        return redis.error_reply('IDPOOL_STALE meta next is ' .. tostring(cur[1] or 'absent') ..
                                 ', refiller expected ' .. expected)
    end
    return nil
end

-- idpool_push: the fenced push in one function. The daemon stores a prefetched
-- lease with it (no ids); its chunks of IDs go through idpool_guard and
-- native commands instead (below), except while it follows a Cluster slot
-- being migrated (a transaction on a pool absent there answers TRYAGAIN).
--
--   FCALL idpool_push 1 <lock> token epoch expected_next next hi nlo nhi [id ...]
--   FCALL idpool_push 3 <pool> <meta> <lock> (the same arguments)
--
-- Appends the ids to the pool and stores the caller's new lease state
-- (next, hi, nlo, nhi) in meta only if
--   1. the caller still holds the lock (its random token is the lock value):
--      a refiller paused past its lock TTL is rejected with IDPOOL_FENCED;
--   2. the caller's epoch is the validated one (else IDPOOL_UNVALIDATED: it
--      validates again), and meta was written under it: a pool of an earlier
--      epoch may hold IDs that were already handed out, so pool and meta are
--      discarded (IDPOOL_EPOCH) and the caller starts again from a fresh
--      MySQL lease;
--   3. meta's next equals the value the caller generated from
--      (expected_next; "" = meta must not exist), else IDPOOL_STALE.
-- Returns the pool length after the push.
local function push(keys, args)
    local pool, meta, lock = app_keys(keys, 'idpool_push', 'lock')
    if not pool then
        return redis.error_reply(meta)
    end
    local epoch = args[2]
    local err = fence(pool, meta, lock, args[1], epoch, args[3])
    if err then
        return err
    end

    local n = #args - 7
    local len
    if n > 0 then
        len, err = pooled('RPUSH', pool, unpack(args, 8))
    else
        len, err = pooled('LLEN', pool)
    end
    if not len then
        return redis.error_reply(MOVING .. EPOCH_RETRY_MS .. ' ms (' .. err .. ')')
    end
    redis.call('HSET', meta, 'next', args[4], 'hi', args[5], 'epoch', epoch)
    if args[7] ~= '' then
        redis.call('HSET', meta, 'nlo', args[6], 'nhi', args[7])
    else
        redis.call('HDEL', meta, 'nlo', 'nhi')
    end
    redis.call('HINCRBY', meta, 'pushed', n)
    return len
end

-- idpool_epoch: discard what is left of an earlier epoch (a restart or a
-- failover, data restored into this process, the library reloaded), so that
-- IDs an earlier epoch may already have handed out are never served again:
-- a pool whose meta was written under another epoch, a pool whose meta lacks
-- one (evicted or deleted), and a meta of another epoch without a pool
-- (drained by LPOP). The daemon's sweep calls it for every pool and meta
-- key it finds after each validation, because a pool above its low-water
-- mark would otherwise not be pushed to (and so not be checked by the fence)
-- for a long time. Refused (IDPOOL_UNVALIDATED) when the caller's epoch is
-- not the validated one. Allowed over maxmemory: the sweep must work
-- whenever LPOP does.
--   FCALL idpool_epoch 1 <meta> epoch          -> 1 discarded, 0 kept
--   FCALL idpool_epoch 2 <pool> <meta> epoch   (the same)
local function epoch(keys, args)
    local pool, meta = app_keys(keys, 'idpool_epoch', 'meta')
    if not pool then
        return redis.error_reply(meta)
    end
    local err = current(args[1])
    if err then
        return err
    end
    local e = redis.call('HGET', meta, 'epoch')
    if e ~= args[1] and (e or pooled('EXISTS', pool) == 1) then
        discard(pool, meta)
        return 1
    end
    return 0
end

-- idpool_validate: the one call that validates. A daemon sends it only
-- after it confirmed, on the same connection, that the server is a primary
-- (INFO role:master); it is a write function, so a replica refuses it
-- (READONLY) whoever sends it. When this library has no epoch yet, or the
-- server's run_id:master_replid (base) changed since it chose one (a
-- promotion: a demoted primary that resynced partially keeps its library),
-- the epoch becomes base:nonce, with the caller's random nonce; otherwise
-- the current one stays (every daemon shares it). Returns the epoch, which
-- the caller writes into every meta it pushes to.
--   FCALL idpool_validate 0 base nonce   -> epoch
local function validate(keys, args)
    local base, nonce = args[1], args[2]
    if #keys ~= 0 or #args ~= 2 or base == '' or not string.match(nonce, '^%x+$') or
        #nonce < 16 then
        return redis.error_reply('IDPOOL_BADARG idpool_validate takes 0 keys and 2 arguments: ' ..
                                 'run_id:master_replid and a random hex nonce (>= 16 digits)')
    end
    if not validated or validated_base ~= base then
        validated = base .. ':' .. nonce
        validated_base = base
    end
    return validated
end

-- idpool_validated: the epoch takes are served under, or nil when this
-- library has none (it was loaded, reloaded or restored since the last
-- validation). The daemons read it every second to notice a new library
-- state without waiting for a push to be refused. Validates nothing.
--   FCALL_RO idpool_validated 0   -> epoch or nil
local function validated_epoch()
    return validated
end

-- idpool_renew: extend the lock only if the caller still holds it.
--   FCALL idpool_renew 1 <lock> token ttl_ms   -> 1 renewed, 0 not held
local function renew(keys, args)
    if redis.call('GET', keys[1]) == args[1] then
        return redis.call('PEXPIRE', keys[1], args[2])
    end
    return 0
end

-- idpool_take: the client's take, with the application's limits enforced
-- inside Redis (they hold across any number of clients).
--
--   FCALL idpool_take 1 <meta> COUNT          -> array of up to COUNT IDs
--   FCALL idpool_take 2 <pool> <meta> COUNT   (the same)
--
-- Errors: IDPOOL_BADARG (not two keys and one argument; COUNT not an integer
-- >= 1), IDPOOL_NOAPP (no limits
-- in meta: the daemon does not serve this application), IDPOOL_EPOCH (the
-- pool was not written under this Redis process's validated epoch: after a
-- restart, a rollback or a failover, until the daemon's sweep; says when to
-- retry; never an ID that may have been handed out before), IDPOOL_LIMIT (COUNT
-- above max_size_per_times), IDPOOL_RATE (max_size_per_second IDs already
-- granted in this second; says how long to wait), IDPOOL_MOVING (a Cluster
-- slot being migrated, the pool not on this node: retry). A short or empty reply
-- counts an underflow in meta and fires the underflow alert.
local TAKE_USAGE = 'FCALL idpool_take 1 <prefix>:{app}:meta COUNT'

local function take(keys, args)
    local raw = args[1] or ''
    if (#keys ~= 1 and #keys ~= 2) or #args ~= 1 then
        return redis.error_reply('IDPOOL_BADARG idpool_take takes 1 key (or 2) and 1 argument, ' ..
                                 'got ' .. #keys .. ' and ' .. #args .. ': ' .. TAKE_USAGE)
    end
    local pool, meta = app_keys(keys, 'idpool_take', 'meta')
    if not pool then
        return redis.error_reply(meta .. ': ' .. TAKE_USAGE)
    end
    if not string.match(raw, '^%d+$') or tonumber(raw) < 1 then
        return redis.error_reply('IDPOOL_BADARG count must be an integer >= 1, got ' ..
                                 string.format('%q', raw))
    end
    -- One application's pool and meta: "<prefix>:{key}:pool" and "<prefix>:{key}:meta"
    -- with the same "<prefix>:{key}" (else one application's IDs would be served
    -- under another's limits, and a typo'd pool would fire a false underflow).
    if #pool < 6 or string.sub(pool, -5) ~= ':pool' or string.sub(meta, -5) ~= ':meta' or
        string.sub(pool, 1, -6) ~= string.sub(meta, 1, -6) then
        return redis.error_reply('IDPOOL_BADARG keys ' .. pool .. ' and ' .. meta ..
                                 ' are not the pool and meta of one application: ' .. TAKE_USAGE)
    end
    local n = tonumber(raw)
    local cfg = redis.call('HMGET', meta, 'per_take', 'per_second', 'rl_sec', 'rl_used', 'taken',
                           'epoch')
    if not cfg[1] or not cfg[2] then
        return redis.error_reply('IDPOOL_NOAPP no such application: ' .. meta ..
                                 ' has no limits (not served by idpoold)')
    end
    if not validated or cfg[6] ~= validated then
        redis.call('HINCRBY', meta, 'refused_epoch', 1)
        return redis.error_reply('IDPOOL_EPOCH pool not yet re-validated after a Redis restart, ' ..
                                 'rollback or failover; retry in ' .. EPOCH_RETRY_MS .. ' ms')
    end
    local per_take, per_second = tonumber(cfg[1]), tonumber(cfg[2])
    if n > per_take or n > per_second then
        redis.call('HINCRBY', meta, 'refused_limit', 1)
        if n > per_take then
            return redis.error_reply('IDPOOL_LIMIT count ' .. raw ..
                                     ' exceeds max_size_per_times ' .. per_take)
        end
        return redis.error_reply('IDPOOL_LIMIT count ' .. raw .. ' exceeds max_size_per_second ' ..
                                 per_second .. ': it can never be granted within one second')
    end
    local t = redis.call('TIME')
    local used = (cfg[3] == t[1]) and tonumber(cfg[4]) or 0
    if used + n > per_second then
        redis.call('HINCRBY', meta, 'refused_rate', 1)
        local wait = 1000 - math.floor(tonumber(t[2]) / 1000)
        return redis.error_reply('IDPOOL_RATE max_size_per_second ' .. per_second ..
                                 ' reached (' .. used .. ' granted this second); retry in ' ..
                                 wait .. ' ms')
    end
    local ids, err = pooled('LPOP', pool, n)
    if not ids then
        if err then
            return redis.error_reply(MOVING .. EPOCH_RETRY_MS .. ' ms')
        end
        ids = {}
    end
    -- One write for the rate window and the counter (counts stay far below 2^53).
    redis.call('HSET', meta, 'rl_sec', t[1], 'rl_used', used + #ids, 'taken',
               (tonumber(cfg[5]) or 0) + #ids)
    if #ids < n then
        redis.call('HINCRBY', meta, 'underflows', 1)
        alert_fire(meta, 'underflow', 'take of ' .. n .. ' got ' .. #ids .. ': the pool ran dry',
                   {requested = n, granted = #ids})
    end
    return ids
end

-- idpool_status: what the daemon checks every interval, in one round trip.
--   FCALL_RO idpool_status 1 <meta>   (or 2 <pool> <meta>)
--   -> {LLEN, underflows, refused_limit, refused_rate, taken,
--       underflow alert firing 0/1, per_take or nil, per_second or nil, pushed,
--       refused_epoch, meta epoch or ""}
-- The limits come back so the daemon can restore them when meta was lost;
-- the epoch so that it can sweep a pool not written under its own. It reads
-- only: it validates nothing (it runs on replicas too).
local function status(keys, args)
    local pool, meta = app_keys(keys, 'idpool_status', 'meta')
    if not pool then
        return redis.error_reply(meta)
    end
    local m = redis.call('HMGET', meta, 'underflows', 'refused_limit', 'refused_rate', 'taken',
                         'alert:underflow', 'per_take', 'per_second', 'pushed', 'refused_epoch',
                         'epoch')
    -- a pool that is not on this node (a slot being migrated) counts as empty:
    -- the refill that follows finds where it is
    return {pooled('LLEN', pool) or 0, tonumber(m[1] or 0), tonumber(m[2] or 0),
            tonumber(m[3] or 0), tonumber(m[4] or 0), m[5] == 'firing' and 1 or 0, m[6], m[7],
            tonumber(m[8] or 0), tonumber(m[9] or 0), m[10] or ''}
end

-- idpool_alert: a daemon moves an alert to firing or resolved.
--   FCALL idpool_alert 1 <meta> kind firing|resolved message [json-object-of-extras]
--   -> 1: this caller is the one to announce it (log, webhook); 0: another
--   instance already did.
-- Firing: published on the state change; announcing is claimed with a
-- second field, because an underflow fired by idpool_take inside Redis
-- still needs one daemon to log it and call the webhook. Resolving: the
-- first instance to resolve publishes and announces; "resolved" stays in
-- the state field so later ones stay quiet. A state Redis lost meanwhile
-- (FLUSHALL, restart) counts as still firing: the resolution still goes out.
local function alert(keys, args)
    local meta, kind, firing = keys[1], args[1], args[2] == 'firing'
    local field, claim = 'alert:' .. kind, 'alert:' .. kind .. ':notified'
    local extra = nil
    if args[4] and args[4] ~= '' then
        extra = cjson.decode(args[4])
    end
    if firing then
        alert_fire(meta, kind, args[3], extra)
        return redis.call('HSETNX', meta, claim, '1')
    end
    if redis.call('HGET', meta, field) == 'resolved' then
        return 0
    end
    redis.call('HSET', meta, field, 'resolved')
    redis.call('HDEL', meta, claim)
    publish(meta, kind, 'resolved', args[3], extra)
    return 1
end

-- idpool_guard: the fence for a chunk the daemon appends with native commands
-- (RPUSH costs Redis half the CPU per ID of unpacking 1000 arguments here):
--
--   WATCH <lock>
--   FCALL idpool_guard 3 <pool> <meta> <lock> token epoch expected_next
--   MULTI  RPUSH <pool> id...  HSET <meta> next .. hi .. epoch ..  ...
--          PEXPIRE <lock> ttl
--   (the daemon waits for the guard's verdict) EXEC only on 1, else DISCARD
--
-- The guard makes the checks of idpool_push and returns 1 or the error. The
-- verdict is what decides: whatever keeps the guard from running (the
-- library missing or another version without it, a Lua error, BUSY, OOM)
-- gives an error reply, and the transaction is discarded. WATCH covers the
-- time between the verdict and EXEC: a lock that expires or is taken over
-- meanwhile aborts the EXEC. A failed guard writes nothing (the legitimate
-- holder's transactions are not disturbed), except that a pool of another
-- epoch is discarded as in idpool_push.
local function guard(keys, args)
    local pool, meta, lock = app_keys(keys, 'idpool_guard', 'lock')
    if not pool then
        return redis.error_reply(meta)
    end
    local err = fence(pool, meta, lock, args[1], args[2], args[3])
    if err then
        return err
    end
    return 1
end

-- idpool_version: the version of the loaded library (LIB_VERSION).
local function version()
    return LIB_VERSION
end

-- idpool_unlock: release the lock only if the caller still holds it.
--   FCALL idpool_unlock 1 <lock> token   -> 1 released, 0 not held
local function unlock(keys, args)
    if redis.call('GET', keys[1]) == args[1] then
        return redis.call('DEL', keys[1])
    end
    return 0
end

redis.register_function('idpool_push', push)
redis.register_function('idpool_guard', guard)
redis.register_function{function_name = 'idpool_epoch', callback = epoch, flags = {'allow-oom'}}
redis.register_function('idpool_renew', renew)
-- not no-writes: a replica refuses it (READONLY), so only a primary is ever validated
redis.register_function{function_name = 'idpool_validate', callback = validate,
                        flags = {'allow-oom'}}
redis.register_function{function_name = 'idpool_validated', callback = validated_epoch,
                        flags = {'no-writes', 'allow-oom'}}
redis.register_function('idpool_unlock', unlock)
redis.register_function('idpool_take', take)
redis.register_function{function_name = 'idpool_status', callback = status, flags = {'no-writes'}}
redis.register_function('idpool_alert', alert)
redis.register_function{function_name = 'idpool_version', callback = version,
                        flags = {'no-writes'}}
