#!/usr/bin/env bash
# Redis comes back with older data (brief §4, §9, §11; issue "No duplicate
# ever", findings 3, 4, 5 and the zero-window take).
#
# A copy of Redis' data is taken while application `rb` holds a full pool;
# then 600 of those IDs are handed out (popped and recorded). Redis is
# stopped and started again from the old copy, so its pool holds IDs that
# were already handed out:
# (z) with no daemon running yet, idpool_take refuses the pool
#     (IDPOOL_EPOCH ... retry in N ms) and counts the refusal, while a plain
#     LPOP still gets a stale ID (the documented window of LPOP clients);
# (3) the daemon starts while MySQL is down: it knows no application, yet
#     the stale pool is discarded within seconds (the sweep does not need
#     the rows), and takes never return a handed-out ID;
# (5) `ev`'s meta is deleted in the old copy (as eviction would), its pool
#     kept: the pool is discarded too; and the sweep still works over
#     maxmemory (idpool_epoch is allowed when OOM, as LPOP is);
# (4) with MySQL back, application `busy` is waiting for a lease (its
#     reservation blocked by a table lock) when Redis comes back with old
#     data once more: its stale pool is discarded at once, not when its
#     MySQL job returns.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

take() { rcli FCALL idpool_take 2 "$(pool_key "$1")" "$(meta_key "$1")" "$2" 2>&1 | sed '/^$/d'; }
snapshot() { # NAME: a copy of Redis' data now
    rcli BGREWRITEAOF >/dev/null
    wait_until 10 eval '[[ $(rcli INFO persistence | tr -d "\r" | sed -n "s/^aof_rewrite_in_progress://p") == 0 ]]' ||
        fail "AOF rewrite did not finish"
    sleep 1.2 # appendfsync everysec
    rm -rf "${DIR:?}/${1:?}"
    cp -a "$DIR/redis" "$DIR/$1"
}
restore() { # NAME: Redis restarted from that copy
    redis_stop >/dev/null
    rm -rf "$DIR/redis"
    cp -a "$DIR/$1" "$DIR/redis"
    redis_start
}
COMMON=(--tick-ms 50 --lock-ttl-ms 500 --reload-ms 300 --redis-timeout-ms 500 --mysql-timeout-ms 1000)

add_app rb step=100 max_pool_size=1000 min_size_percent=50
add_app ev step=100 max_pool_size=1000 min_size_percent=50
start_daemon a "${COMMON[@]}" --instance rb-a
wait_until 5 pool_ge rb 1000 || fail "rb never filled"
wait_until 5 pool_ge ev 1000 || fail "ev never filled"
stop_daemon a
snapshot old
rcli LPOP "$(pool_key rb)" 600 >"$DIR/handed.txt"
rcli LPOP "$(pool_key ev)" 600 >"$DIR/handed_ev.txt"
assert_eq 600 "$(count_ids "$DIR/handed.txt")" "IDs handed out after the copy"

# ===================================================================== z ===
restore old
rcli DEL "$(meta_key ev)" >/dev/null # ev's meta evicted in the old copy, its pool kept
# Positive control: the restored pools hold the handed-out IDs again (every
# ID of them is stale: none may be handed out after the sweep, below).
rcli LRANGE "$(pool_key rb)" 0 -1 >"$DIR/restored_rb.txt"
rcli LRANGE "$(pool_key ev)" 0 -1 >"$DIR/restored_ev.txt"
assert_eq 600 "$(grep -cxFf "$DIR/handed.txt" "$DIR/restored_rb.txt")" "handed-out IDs back in rb's restored pool"
assert_eq 600 "$(grep -cxFf "$DIR/handed_ev.txt" "$DIR/restored_ev.txt")" "handed-out IDs back in ev's restored pool"
out=$(take rb 5)
[[ $out == IDPOOL_EPOCH*'retry in '*' ms'* ]] ||
    fail "idpool_take on a pool restored from older data: expected IDPOOL_EPOCH, got: $(head -c 200 <<<"$out")"
assert_eq 1 "$(rcli HGET "$(meta_key rb)" refused_epoch)" "refused_epoch counted in meta"
stale=$(rcli LPOP "$(pool_key rb)")
grep -qx "$stale" "$DIR/handed.txt" || fail "LPOP got $stale, not one of the handed-out IDs (no window to show?)"
info "plain LPOP in the window got handed-out ID $stale (the documented LPOP window); idpool_take: $out"
pass "before any sweep, idpool_take refuses a pool restored from older data (IDPOOL_EPOCH)"

# ===================================================================== 3 ===
mysql_stop >/dev/null
# Over maxmemory (noeviction): LPOP still works, and so must the sweep.
used=$(rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p')
rcli CONFIG SET maxmemory $((used / 2)) >/dev/null
rcli SET probe x 2>&1 | grep -q OOM || fail "Redis is not over maxmemory"
start_daemon b "${COMMON[@]}" --instance rb-b
t0=$(now_us)
gone() { [[ $(llen rb) == 0 && $(llen ev) == 0 ]]; }
wait_until 5 gone || fail "stale pools kept with MySQL down (rb $(llen rb), ev $(llen ev))"
info "stale pools discarded $((($(now_us) - t0) / 1000)) ms after the daemon started, MySQL down"
log_has b 'epoch sweep .*: 2 pools and [0-9]+ metas in Redis, 2 discarded' || fail "no sweep line in the log"
out=$(take rb 5)
[[ $(grep -cE '^[0-9]+$' <<<"$out") == 0 ]] || fail "idpool_take got IDs from a swept pool, MySQL down: $out"
rcli CONFIG SET maxmemory 0 >/dev/null
mysql_start
wait_until 10 pool_ge rb 500 || fail "rb not refilled after MySQL came back"
wait_until 10 pool_ge ev 500 || fail "ev not refilled after MySQL came back"
# The IDs served after the refill: none of the restored pools' (stale) IDs.
out=$(take rb 100)
[[ $(grep -cE '^[0-9]+$' <<<"$out") == 100 ]] || fail "takes after the sweep: $out"
! grep -qxFf "$DIR/restored_rb.txt" <<<"$out" || fail "idpool_take returned a stale ID: $out"
rcli LRANGE "$(pool_key rb)" 0 -1 >"$DIR/rb_now.txt"
! grep -qxFf "$DIR/restored_rb.txt" "$DIR/rb_now.txt" || fail "a stale ID is back in rb's pool"
rcli LRANGE "$(pool_key ev)" 0 -1 >"$DIR/ev_now.txt"
! grep -qxFf "$DIR/restored_ev.txt" "$DIR/ev_now.txt" || fail "a stale ID is back in ev's pool"
pass "MySQL down, over maxmemory: the stale pools (one without meta) are discarded at start; takes never repeat an ID"

# ===================================================================== 4 ===
add_app busy step=100 max_pool_size=1000 min_size_percent=50
wait_until 5 pool_ge busy 1000 || fail "busy never filled"
sleep 0.5
# What the copy holds (the pool is full, nothing pops): positive control
# that the restored pool is full of IDs handed out since.
rcli LRANGE "$(pool_key busy)" 0 -1 >"$DIR/snap_busy.txt"
snapshot old2
rcli LRANGE "$(pool_key busy)" 0 -1 | cmp -s - "$DIR/snap_busy.txt" || fail "busy's pool changed during the copy"
rcli LPOP "$(pool_key busy)" 600 >"$DIR/handed_busy.txt"
assert_eq 600 "$(grep -cxFf "$DIR/handed_busy.txt" "$DIR/snap_busy.txt")" "handed-out IDs of busy in the copy"
# busy's next reservation waits for the lease table; the pool is below its mark.
sql "LOCK TABLES application_lease WRITE; DO SLEEP(8); UNLOCK TABLES;" >"$DIR/locker.out" 2>&1 &
LOCKER=$!
rcli DEL "$(meta_key busy)" >/dev/null # no lease in meta: the refill must reserve
rcli LTRIM "$(pool_key busy)" 0 99 >/dev/null # below its mark
wait_until 5 eval "[[ \$(sql \"SELECT COUNT(*) FROM information_schema.processlist
                        WHERE state LIKE 'Waiting for table%lock'\") -ge 1 ]]" ||
    fail "busy's reservation did not block"
info "busy waits for its lease; Redis comes back from older data"
restore old2
t0=$(now_us)
wait_until 3 eval '[[ $(llen busy) == 0 ]]' ||
    fail "busy's stale pool kept while its reservation waits ($(llen busy) IDs)"
info "busy's stale pool discarded $((($(now_us) - t0) / 1000)) ms after Redis came back"
wait "$LOCKER" || true
wait_until 10 pool_ge busy 500 || fail "busy not refilled after the lock"
# The IDs served after the refill: none of the copy's (stale) IDs.
out=$(take busy 100)
[[ $(grep -cE '^[0-9]+$' <<<"$out") == 100 ]] || fail "busy: takes after the sweep: $out"
! grep -qxFf "$DIR/snap_busy.txt" <<<"$out" || fail "idpool_take returned a stale ID of busy: $out"
rcli LRANGE "$(pool_key busy)" 0 -1 >"$DIR/busy_now.txt"
! grep -qxFf "$DIR/snap_busy.txt" "$DIR/busy_now.txt" || fail "a stale ID is back in busy's pool"
pass "a pool waiting for its lease is swept at once after Redis comes back from older data"
stop_daemon b
