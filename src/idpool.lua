#!lua name=idpool
--
-- idpool Redis Function library, loaded by idpoold at start with
-- FUNCTION LOAD REPLACE. All keys of one application share one hash tag
-- ({entity_key}), so every function here is Redis Cluster safe.
--
-- IDs and offsets are passed and stored as decimal strings and only ever
-- compared as strings: Lua numbers are doubles, exact only below 2^53.

-- idpool_push: the fenced push, the only writer of an application's pool
-- and meta hash.
--
--   FCALL idpool_push 3 <pool> <meta> <lock>
--         token run_id expected_next next hi nlo nhi [id ...]
--
-- Appends the ids to the pool and stores the caller's new lease state
-- (next, hi, nlo, nhi) in meta only if
--   1. the caller still holds the lock (its random token is the lock value):
--      a refiller paused past its lock TTL is rejected with IDPOOL_FENCED;
--   2. meta was written while connected to this same Redis process (run_id):
--      after a restart or failover the pool may hold IDs that were already
--      handed out, so pool and meta are discarded (IDPOOL_EPOCH) and the
--      caller starts again from a fresh MySQL lease;
--   3. meta's next equals the value the caller generated from
--      (expected_next; "" = meta must not exist), else IDPOOL_STALE.
-- Returns the pool length after the push.
local function push(keys, args)
    local pool, meta, lock = keys[1], keys[2], keys[3]
    local token, run_id, expected = args[1], args[2], args[3]

    if redis.call('GET', lock) ~= token then
        return redis.error_reply('IDPOOL_FENCED lock not held by this refiller')
    end
    local cur = redis.call('HMGET', meta, 'next', 'run_id')
    if cur[1] and cur[2] ~= run_id then
        redis.call('DEL', pool, meta)
        return redis.error_reply('IDPOOL_EPOCH redis restarted or failed over; pool discarded')
    end
    if (cur[1] or '') ~= expected then
        return redis.error_reply('IDPOOL_STALE meta next is ' .. tostring(cur[1] or 'absent') ..
                                 ', refiller expected ' .. expected)
    end

    local n = #args - 7
    local len
    if n > 0 then
        len = redis.call('RPUSH', pool, unpack(args, 8))
    else
        len = redis.call('LLEN', pool)
    end
    redis.call('HSET', meta, 'next', args[4], 'hi', args[5], 'run_id', run_id)
    if args[7] ~= '' then
        redis.call('HSET', meta, 'nlo', args[6], 'nhi', args[7])
    else
        redis.call('HDEL', meta, 'nlo', 'nhi')
    end
    redis.call('HINCRBY', meta, 'pushed', n)
    return len
end

-- idpool_epoch: discard a pool that was filled while connected to another
-- Redis process (restart with a restored dataset, or failover), so that IDs
-- the old process already handed out are never served again. The daemon
-- calls it for every application after each (re)connect, because a pool
-- above its low-water mark would otherwise not be pushed to (and so not be
-- checked by idpool_push) for a long time.
--   FCALL idpool_epoch 2 <pool> <meta> run_id   -> 1 discarded, 0 kept
local function epoch(keys, args)
    local cur = redis.call('HMGET', keys[2], 'next', 'run_id')
    if cur[1] and cur[2] ~= args[1] then
        redis.call('DEL', keys[1], keys[2])
        return 1
    end
    return 0
end

-- idpool_renew: extend the lock only if the caller still holds it.
--   FCALL idpool_renew 1 <lock> token ttl_ms   -> 1 renewed, 0 not held
local function renew(keys, args)
    if redis.call('GET', keys[1]) == args[1] then
        return redis.call('PEXPIRE', keys[1], args[2])
    end
    return 0
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
redis.register_function('idpool_epoch', epoch)
redis.register_function('idpool_renew', renew)
redis.register_function('idpool_unlock', unlock)
